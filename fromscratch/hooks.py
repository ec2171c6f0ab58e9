"""Hooks: functions that see (and may replace) a gradient as the backward computes it, stored where the engine finds them; `retain_grad` is one of them."""

import weakref

import numpy as np

from .core import Tensor, add_grads

class RemovableHandle:
    "Returned when a hook is registered: `remove()` unregisters it (also as a context manager)."
    next_id = 0
    def __init__(self, hooks):
        self.hooks, self.id = weakref.ref(hooks), RemovableHandle.next_id
        RemovableHandle.next_id += 1
    def remove(self):
        hooks = self.hooks()
        if hooks is not None: hooks.pop(self.id, None)
    def __enter__(self): return self
    def __exit__(self, *exc): self.remove()

class HookDict(dict):
    "Hooks by handle id, in the order they were added; a handle points to it weakly, so it never keeps it alive."
    __slots__ = ('__weakref__',)
    def add(self, hook):
        "Store `hook`; return the handle whose `remove()` takes it out again."
        handle = RemovableHandle(self)
        self[handle.id] = hook
        return handle

def register_hook(self, hook):
    "Call `hook(grad)` whenever a gradient for this tensor is computed; it may return a replacement."
    if not self._requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is None:                         # a leaf keeps its hooks; a result's live on its node
        if self._hooks is None: self._hooks = HookDict()
        return self._hooks.add(hook)
    if self.grad_fn.pre_hooks is None: self.grad_fn.pre_hooks = {}
    return self.grad_fn.pre_hooks.setdefault(self._output_nr, HookDict()).add(hook)

def retain_grad(self):
    "Keep the gradient of this non-leaf tensor in `.grad` after backward (a no-op on leaves)."
    if not self._requires_grad: raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if self.grad_fn is None or self._retains_grad: return
    self._retains_grad, ref = True, weakref.ref(self)
    def store(grad):
        t = ref()
        if t is None or not t._retains_grad: return
        if grad.grad_fn is not None: t._grad = grad if t._grad is None else add_grads(t._grad, grad)   # create_graph
        else: t._grad = Tensor(grad.array.copy()) if t._grad is None else Tensor(t._grad.array + grad.array)
    if self.grad_fn.post_hooks is None: self.grad_fn.post_hooks = {}
    self.grad_fn.post_hooks[self._output_nr] = store
