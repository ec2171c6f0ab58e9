"""A small classifier: CrossEntropyLoss, Dropout in eval mode, argmax accuracy, a state_dict saved and loaded."""
import io
import numpy as np
import torch

rng = np.random.default_rng(4)
centers = rng.standard_normal((3, 4)) * 3
labels = rng.integers(0, 3, 300)
points = centers[labels] + rng.standard_normal((300, 4))
X, y = torch.tensor(points, dtype=torch.float32), torch.tensor(labels)

model = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.ReLU(), torch.nn.Dropout(0.5), torch.nn.Linear(32, 3))
with torch.no_grad():
    for m in model:
        if isinstance(m, torch.nn.Linear):
            m.weight.copy_(torch.tensor(rng.uniform(-0.3, 0.3, tuple(m.weight.shape)), dtype=torch.float32))
            m.bias.zero_()
model.eval()                                  # dropout off: both libraries compute the same function
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
losses = []
for epoch in range(30):
    optimizer.zero_grad()
    loss = loss_fn(model(X), y)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
with torch.no_grad():
    accuracy = (model(X).argmax(dim=1) == y).float().mean().item()
buffer = io.BytesIO()
torch.save(model.state_dict(), buffer)
buffer.seek(0)
copy = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.ReLU(), torch.nn.Dropout(0.5), torch.nn.Linear(32, 3))
copy.load_state_dict(torch.load(buffer))
copy.eval()
RESULT = {'losses': losses[::5], 'accuracy': accuracy, 'same_after_load': torch.equal(copy(X), model(X))}
