"""``Trace_ELBO`` whose loss stays on the device: the same estimate and gradients, no host reads.

Pyro's ``Trace_ELBO.differentiable_loss`` adds up the ELBO as Python floats (one ``.item()`` per sample site)
and returns ``loss + (surrogate - surrogate.item())``, and ``warn_if_nan`` asks ``isnan(loss).any()`` of the
loss and, through a hook, of its gradient. Each of these waits for the device to finish the step so far: on a GPU
a training step stopped five times or more for the host to read a number. Here the same two quantities are
tensors,

    loss = -(sum_model log p - sum_guide log q)                      (the ELBO estimate, Trace_ELBO's value)
    surrogate = -(sum_model log p - sum_guide entropy terms - sum score-function terms)

and the loss is ``surrogate`` itself when the guide is fully reparameterised (then both are the same tensor), else
``loss.detach() + surrogate - surrogate.detach()`` (the value of the ELBO, the gradient of the surrogate: Pyro's
formula without the host read). A non-finite loss is caught by the trainer without a host read
(:meth:`pyroinv.inference.train.Trainer.first_nonfinite`).
"""

from __future__ import annotations

from typing import cast

import pyro
import torch
from pyro.infer.trace_elbo import _compute_log_r
from pyro.infer.util import is_identically_zero


class DeviceTrace_ELBO(pyro.infer.Trace_ELBO):
    """:class:`pyro.infer.Trace_ELBO` with :meth:`differentiable_loss` kept on the device (module docstring).

    ``loss`` and ``loss_and_grads`` are Pyro's own (they return floats by design)."""

    def differentiable_loss(self, model, guide, *args, **kwargs) -> torch.Tensor:
        total: torch.Tensor | float = 0.0
        for model_trace, guide_trace in self._get_traces(model, guide, args, kwargs):
            total = total + particle_loss(model_trace, guide_trace) / self.num_particles
        return cast(torch.Tensor, total)  # a tensor once a particle is added


def particle_loss(model_trace, guide_trace) -> torch.Tensor:
    """One particle's ``-ELBO`` estimate with the surrogate's gradient (module docstring), as a tensor."""
    elbo: torch.Tensor | float
    surrogate: torch.Tensor | float
    elbo = surrogate = 0.0
    log_r = None
    for site in model_trace.nodes.values():
        if site["type"] == "sample":
            elbo = elbo + site["log_prob_sum"]
            surrogate = surrogate + site["log_prob_sum"]
    reparameterised = True
    for site in guide_trace.nodes.values():
        if site["type"] != "sample":
            continue
        _, score_function_term, entropy_term = site["score_parts"]
        elbo = elbo - site["log_prob_sum"]
        if not is_identically_zero(entropy_term):
            surrogate = surrogate - entropy_term.sum()
        if not is_identically_zero(score_function_term):
            reparameterised = False
            if log_r is None:
                log_r = _compute_log_r(model_trace, guide_trace)
            surrogate = surrogate + (log_r.sum_to(site["cond_indep_stack"]) * score_function_term).sum()
    if reparameterised:
        return cast(torch.Tensor, -surrogate)
    elbo_t, surrogate_t = cast(torch.Tensor, elbo), cast(torch.Tensor, surrogate)  # a trace holds sample sites
    return (-elbo_t).detach() + (-surrogate_t) - (-surrogate_t).detach()
