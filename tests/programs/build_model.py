# In the style of the basics tutorial "Build the Neural Network": an nn.Module subclass with Flatten and
# a Sequential stack, its printed structure, logits turned into probabilities by Softmax and a
# prediction by argmax, each layer taken apart on a minibatch of images, and named_parameters.
import numpy as np
import torch

nn = torch.nn
rng = np.random.default_rng(71)


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(14 * 14, 64),
            nn.ReLU(),
            nn.Linear(64, 64),
            nn.ReLU(),
            nn.Linear(64, 10),
        )

    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits


model = NeuralNetwork()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.tensor(rng.uniform(-1, 1, tuple(p.shape)) / np.sqrt(p.shape[-1]), dtype=torch.float32))

X = torch.tensor(rng.uniform(0, 1, (1, 14, 14)), dtype=torch.float32)
logits = model(X)
pred_probab = nn.Softmax(dim=1)(logits)
y_pred = pred_probab.argmax(1)

# the layers one by one
input_image = torch.tensor(rng.uniform(0, 1, (3, 14, 14)), dtype=torch.float32)
flatten = nn.Flatten()
flat_image = flatten(input_image)
layer1 = nn.Linear(in_features=14 * 14, out_features=20)
with torch.no_grad():
    layer1.weight.copy_(torch.tensor(rng.uniform(-0.1, 0.1, (20, 196)), dtype=torch.float32))
    layer1.bias.fill_(0.01)
hidden1 = layer1(flat_image)
before_relu = hidden1.clone()
hidden1 = nn.ReLU()(hidden1)
head = nn.Linear(20, 10)
with torch.no_grad():
    head.weight.copy_(torch.tensor(rng.uniform(-0.2, 0.2, (10, 20)), dtype=torch.float32))
    head.bias.zero_()
seq_modules = nn.Sequential(flatten, layer1, nn.ReLU(), head)
seq_logits = seq_modules(input_image)
softmax = nn.Softmax(dim=1)
pred = softmax(seq_logits)

RESULT = {
    'structure': str(model),
    'logits shape': list(logits.shape),
    'probabilities sum to 1': torch.allclose(pred_probab.sum(1), torch.ones(1)),
    'predicted class': y_pred.tolist(),
    'probabilities': pred_probab.tolist(),
    'flat image size': list(flat_image.size()),
    'hidden1 size': list(hidden1.size()),
    'relu zeroes the negatives': [int((before_relu < 0).sum()), int((hidden1 == 0).sum())],
    'sequential structure': str(seq_modules),
    'sequential output': pred.tolist(),
    'named parameters': [[name, list(param.size())] for name, param in model.named_parameters()],
    'first values': {name: param[:2].reshape(-1)[:3].tolist() for name, param in model.named_parameters()},
    'parameter count': sum(p.numel() for p in model.parameters()),
}
