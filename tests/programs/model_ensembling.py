# In the style of the torch.func tutorial "Model ensembling": several MLPs of one architecture,
# their predictions by a loop, then by stacking their states (stack_module_state) and vmapping
# functional_call over the stacked parameters, with the same minibatch for all or one each.
import copy

import numpy as np
import torch

nn, F = torch.nn, torch.nn.functional
functional_call, stack_module_state, vmap = torch.func.functional_call, torch.func.stack_module_state, torch.func.vmap

rng = np.random.default_rng(5)
torch.set_default_dtype(torch.float64)


class SimpleMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 16)
        self.fc2 = nn.Linear(16, 8)
        self.fc3 = nn.Linear(8, 4)

    def forward(self, x):
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


num_models = 5
models = [SimpleMLP() for _ in range(num_models)]
with torch.no_grad():
    for model in models:
        for p in model.parameters(): p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.5))

data = torch.tensor(rng.standard_normal((10, 3, 4)))
minibatches = data.reshape(1, 10, 3, 4).expand(num_models, 10, 3, 4) + \
    torch.tensor(rng.standard_normal((num_models, 10, 3, 4))) * 0.1
minibatch = data

predictions_diff_minibatch_loop = [model(mb) for model, mb in zip(models, minibatches)]
predictions2 = [model(minibatch) for model in models]

params, buffers = stack_module_state(models)

base_model = copy.deepcopy(models[0]).to('meta')


def fmodel(params, buffers, x): return functional_call(base_model, (params, buffers), (x,))


predictions1_vmap = vmap(fmodel)(params, buffers, minibatches)
predictions2_vmap = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, minibatch)

# the stacked parameters are new leaves that require grad: a loss of the whole ensemble trains them all
loss = vmap(lambda p, b, x: F.cross_entropy(fmodel(p, b, x), x.flatten(1)[:, :4].argmax(1)),
            in_dims=(0, 0, None))(params, buffers, minibatch).sum()
loss.backward()

RESULT = {
    'stacked shapes': {k: list(v.shape) for k, v in params.items()},
    'stacked require grad': all(v.requires_grad and v.is_leaf for v in params.values()),
    'base model on meta': next(base_model.parameters()).device.type,
    'different minibatches agree': torch.allclose(predictions1_vmap, torch.stack(predictions_diff_minibatch_loop)),
    'same minibatch agrees': torch.allclose(predictions2_vmap, torch.stack(predictions2)),
    'predictions': predictions2_vmap[:, 0].tolist(),
    'ensemble mean': predictions2_vmap.mean(0)[:3].tolist(),
    'ensemble loss': loss.item(),
    'gradient of the stacked last bias': params['fc3.bias'].grad.tolist(),
}
