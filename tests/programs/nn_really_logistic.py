# In the style of the tutorial "What is torch.nn really?": logistic regression on MNIST-like images,
# first with raw tensors (a hand-written log_softmax and negative log-likelihood, updates under
# no_grad), then refactored step by step onto F.cross_entropy, nn.Module with nn.Parameter, nn.Linear,
# optim.SGD, TensorDataset, DataLoader, and a fit() with a validation set.
import math

import numpy as np
import torch

nn, F, optim = torch.nn, torch.nn.functional, torch.optim
TensorDataset, DataLoader = torch.utils.data.TensorDataset, torch.utils.data.DataLoader

# a small synthetic stand-in for MNIST: ten noisy prototype images of 28x28 pixels in [0, 1]
rng = np.random.default_rng(81)
prototypes = rng.uniform(0, 1, (10, 784)) ** 3


def make_split(count):
    labels = rng.integers(0, 10, count)
    images = np.clip(prototypes[labels] + rng.normal(0, 0.8, (count, 784)), 0, 1)
    return images.astype(np.float32), labels


(x_train, y_train), (x_valid, y_valid) = make_split(320), make_split(128)
x_train, y_train, x_valid, y_valid = map(torch.tensor, (x_train, y_train, x_valid, y_valid))
n, c = x_train.shape
initial_weights = (rng.standard_normal((784, 10)) / math.sqrt(784)).astype(np.float32)

# from scratch
weights = torch.tensor(initial_weights)
weights.requires_grad_()
bias = torch.zeros(10, requires_grad=True)


def log_softmax(x): return x - x.exp().sum(-1).log().unsqueeze(-1)
def model(xb): return log_softmax(xb @ weights + bias)
def nll(input, target): return -input[range(target.shape[0]), target].mean()
def accuracy(out, yb): return (torch.argmax(out, dim=1) == yb).float().mean()


loss_func = nll
bs = 64
xb, yb = x_train[0:bs], y_train[0:bs]
preds = model(xb)
start = [preds[0].tolist(), list(preds.shape), loss_func(preds, yb).item(), accuracy(preds, yb).item()]

lr, epochs = 0.05, 2
for epoch in range(epochs):
    for i in range((n - 1) // bs + 1):
        start_i = i * bs
        end_i = start_i + bs
        xb, yb = x_train[start_i:end_i], y_train[start_i:end_i]
        loss = loss_func(model(xb), yb)
        loss.backward()
        with torch.no_grad():
            weights -= weights.grad * lr
            bias -= bias.grad * lr
            weights.grad.zero_()
            bias.grad.zero_()
xb, yb = x_train[0:bs], y_train[0:bs]
from_scratch = [loss_func(model(xb), yb).item(), accuracy(model(xb), yb).item()]

# torch.nn.functional: cross_entropy is log_softmax and nll together
loss_func = F.cross_entropy
def model(xb): return xb @ weights + bias
same_with_functional = math.isclose(loss_func(model(xb), yb).item(), from_scratch[0], rel_tol=1e-5)


class Mnist_Logistic(nn.Module):
    def __init__(self):
        super().__init__()
        self.weights = nn.Parameter(torch.tensor(initial_weights))
        self.bias = nn.Parameter(torch.zeros(10))

    def forward(self, xb): return xb @ self.weights + self.bias


def fit_by_hand(model):
    for epoch in range(epochs):
        for i in range((n - 1) // bs + 1):
            start_i = i * bs
            end_i = start_i + bs
            xb, yb = x_train[start_i:end_i], y_train[start_i:end_i]
            loss = loss_func(model(xb), yb)
            loss.backward()
            with torch.no_grad():
                for p in model.parameters(): p -= p.grad * lr
                model.zero_grad()


model = Mnist_Logistic()
fit_by_hand(model)
with_module = loss_func(model(xb), yb).item()


class Mnist_LinearLogistic(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(784, 10)
        with torch.no_grad():
            self.lin.weight.copy_(torch.tensor(initial_weights).t())
            self.lin.bias.zero_()

    def forward(self, xb): return self.lin(xb)


model = Mnist_LinearLogistic()
fit_by_hand(model)
with_linear = loss_func(model(xb), yb).item()


def get_model():
    model = Mnist_LinearLogistic()
    return model, optim.SGD(model.parameters(), lr=lr)


model, opt = get_model()
train_ds = TensorDataset(x_train, y_train)
for epoch in range(epochs):
    for i in range((n - 1) // bs + 1):
        xb, yb = train_ds[i * bs: i * bs + bs]
        loss = loss_func(model(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad()
xb, yb = x_train[0:bs], y_train[0:bs]
with_optim_and_dataset = loss_func(model(xb), yb).item()


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
        val_loss = np.sum(np.multiply(losses, nums)) / np.sum(nums)
        history.append(float(val_loss))
    return history


valid_ds = TensorDataset(x_valid, y_valid)
train_dl, valid_dl = get_data(train_ds, valid_ds, bs)
model, opt = get_model()
history = fit(3, model, loss_func, opt, train_dl, valid_dl)
with torch.no_grad():
    valid_accuracy = accuracy(model(x_valid), y_valid).item()

RESULT = {
    'data': [n, c, y_train[:10].tolist()],
    'before training': start,
    'from scratch': from_scratch,
    'functional agrees': same_with_functional,
    'module, linear, optim agree': [with_module, with_linear, with_optim_and_dataset],
    'batches': [len(train_dl), len(valid_dl), len(train_ds), list(train_ds[0][0].shape)],
    'validation losses': history,
    'validation accuracy': valid_accuracy,
}
