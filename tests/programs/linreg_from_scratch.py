"""Linear regression from scratch, textbook style: synthetic data, a DataLoader over a TensorDataset, minibatch SGD."""
import numpy as np
import torch

rng = np.random.default_rng(2)
true_w, true_b = torch.tensor([2.0, -3.4]), 4.2
features = torch.tensor(rng.standard_normal((1000, 2)), dtype=torch.float32)
labels = (torch.matmul(features, true_w) + true_b).reshape((-1, 1))
labels += torch.tensor(rng.normal(0, 0.01, labels.shape), dtype=torch.float32)

dataset = torch.utils.data.TensorDataset(features, labels)
loader = torch.utils.data.DataLoader(dataset, batch_size=10, shuffle=False)
w = torch.tensor([[0.01], [-0.02]], requires_grad=True)
b = torch.zeros(1, requires_grad=True)


def linreg(X, w, b): return torch.matmul(X, w) + b
def squared_loss(y_hat, y): return (y_hat - y.reshape(y_hat.shape)) ** 2 / 2


def sgd(params, lr, batch_size):
    with torch.no_grad():
        for param in params:
            param -= lr * param.grad / batch_size
            param.grad.zero_()


epochs = []
for epoch in range(3):
    for X, y in loader:
        l = squared_loss(linreg(X, w, b), y)
        l.sum().backward()
        sgd([w, b], 0.03, 10)
    with torch.no_grad():
        epochs.append(float(squared_loss(linreg(features, w, b), labels).mean()))
RESULT = {'epoch_losses': epochs, 'w': w.flatten().tolist(), 'b': b.item(), 'batches': len(loader),
          # the error is a difference of two numbers near 2 and 3.4, so float32 rounding (one unit in the last
          # place is 2.4e-7 there) moves its third digit: kept to 1e-5
          'error_w': round((true_w - w.reshape(true_w.shape)).abs().max().item(), 5)}
