# In the style of the second half of "What is torch.nn really?": a CNN on MNIST-like images, written
# as an nn.Module with F.conv2d layers, then as nn.Sequential with a Lambda layer for the reshaping, then
# with the reshaping moved into a wrapped DataLoader and nn.AdaptiveAvgPool2d so any image size works;
# trained with SGD and momentum, losses on a validation set.
import numpy as np
import torch

nn, F, optim = torch.nn, torch.nn.functional, torch.optim
TensorDataset, DataLoader = torch.utils.data.TensorDataset, torch.utils.data.DataLoader

rng = np.random.default_rng(82)
prototypes = rng.uniform(0, 1, (10, 784)) ** 3


def make_split(count):
    labels = rng.integers(0, 10, count)
    images = np.clip(prototypes[labels] + rng.normal(0, 0.3, (count, 784)), 0, 1)
    return images.astype(np.float32), labels


(x_train, y_train), (x_valid, y_valid) = make_split(256), make_split(64)
x_train, y_train, x_valid, y_valid = map(torch.tensor, (x_train, y_train, x_valid, y_valid))
train_ds, valid_ds = TensorDataset(x_train, y_train), TensorDataset(x_valid, y_valid)
bs, lr = 32, 0.1
loss_func = F.cross_entropy
initial = [rng.uniform(-2.5, 2.5, shape).astype(np.float32) / np.sqrt(np.prod(shape[1:]))
           for shape in ((16, 1, 3, 3), (16, 16, 3, 3), (10, 16, 3, 3))]


def set_weights(convs):
    with torch.no_grad():
        for conv, w in zip(convs, initial):
            conv.weight.copy_(torch.tensor(w))
            conv.bias.fill_(0.01)


def get_data(train_ds, valid_ds, bs):
    return DataLoader(train_ds, batch_size=bs), DataLoader(valid_ds, batch_size=bs * 2)


def loss_batch(model, loss_func, xb, yb, opt=None):
    loss = loss_func(model(xb), yb)
    if opt is not None:
        loss.backward()
        opt.step()
        opt.zero_grad()
    return loss.item(), len(xb)


def fit(epochs, model, loss_func, opt, train_dl, valid_dl):
    history = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_dl: loss_batch(model, loss_func, xb, yb, opt)
        model.eval()
        with torch.no_grad():
            losses, nums = zip(*[loss_batch(model, loss_func, xb, yb) for xb, yb in valid_dl])
        history.append(float(np.sum(np.multiply(losses, nums)) / np.sum(nums)))
    return history


class Mnist_CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1)
        self.conv3 = nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1)

    def forward(self, xb):
        xb = xb.view(-1, 1, 28, 28)
        xb = F.relu(self.conv1(xb))
        xb = F.relu(self.conv2(xb))
        xb = F.relu(self.conv3(xb))
        xb = F.avg_pool2d(xb, 4)
        return xb.view(-1, xb.size(1))


train_dl, valid_dl = get_data(train_ds, valid_ds, bs)
model = Mnist_CNN()
set_weights([model.conv1, model.conv2, model.conv3])
opt = optim.SGD(model.parameters(), lr=lr, momentum=0.9)
module_history = fit(3, model, loss_func, opt, train_dl, valid_dl)


class Lambda(nn.Module):
    def __init__(self, func):
        super().__init__()
        self.func = func

    def forward(self, x): return self.func(x)


def preprocess(x): return x.view(-1, 1, 28, 28)


model = nn.Sequential(
    Lambda(preprocess),
    nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1), nn.ReLU(),
    nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1), nn.ReLU(),
    nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1), nn.ReLU(),
    nn.AvgPool2d(4),
    Lambda(lambda x: x.view(x.size(0), -1)),
)
set_weights([model[1], model[3], model[5]])
opt = optim.SGD(model.parameters(), lr=lr, momentum=0.9)
sequential_history = fit(3, model, loss_func, opt, train_dl, valid_dl)


class WrappedDataLoader:
    def __init__(self, dl, func):
        self.dl, self.func = dl, func

    def __len__(self): return len(self.dl)

    def __iter__(self):
        for b in self.dl: yield self.func(*b)


def preprocess_batch(x, y): return x.view(-1, 1, 28, 28), y


train_dl, valid_dl = get_data(train_ds, valid_ds, bs)
train_dl, valid_dl = WrappedDataLoader(train_dl, preprocess_batch), WrappedDataLoader(valid_dl, preprocess_batch)
model = nn.Sequential(
    nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1), nn.ReLU(),
    nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1), nn.ReLU(),
    nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1),
    nn.Flatten(),
)
set_weights([model[0], model[2], model[4]])
opt = optim.SGD(model.parameters(), lr=lr, momentum=0.9)
adaptive_history = fit(3, model, loss_func, opt, train_dl, valid_dl)
with torch.no_grad():
    other_size = list(model(torch.ones(2, 1, 20, 20)).shape)

RESULT = {
    'module': module_history,
    'sequential with Lambda': sequential_history,
    'adaptive pooling': adaptive_history,
    'any image size': other_size,
    'layers': [type(m).__name__ for m in model],
    'batches per epoch': len(train_dl),
}
