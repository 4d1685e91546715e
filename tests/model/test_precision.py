"""bfloat16 products (pyroinv.model.precision): the gradients of eta and W1 against float64, for both precisions,
with stated tolerances; float32 unchanged to the bit; auto resolves by the processor."""
import pyro
import pytest
import torch

from pyroinv.config import Config
from pyroinv.inference.build import build_model
from pyroinv.model import lie
from pyroinv.model.precision import native_bf16, resolve_precision
from pyroinv.model.scope import local_params

#: relative error of the gradient (its norm) against float64: float32 rounds at 2^-24, bfloat16's operands at 2^-8
TOLERANCE = {"fp32": 1e-4, "bf16": 5e-2}


def _gradients(network: str, precision: str, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """``d/d(eta, first layer)`` of the mean NLL of 16 images under fixed transforms and a fixed ``W2``."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(16, 1, 28, 28, generator=g, dtype=torch.float64)
    y = torch.randint(0, 10, (16,), generator=g)
    eps = lie.stochastic_eps(4, (2,), generator=g, dtype=torch.float64)
    extra = {"depth": 2} if network == "mlp" else {}
    cfg = Config(network=network, hidden=64, samples=4, init_eta=40.0, precision=precision, **extra).validate()
    pyro.set_rng_seed(0)
    model, _ = build_model(cfg, (1, 28, 28), 10)
    model = model.to(dtype)
    W2 = torch.randn(10, model.features.num_features, generator=g, dtype=torch.float64).to(dtype) * 0.3
    W1 = model.features.W1
    eta = next(model.invariance.parameters())
    with local_params():
        T = lie.transforms(model.invariance.eta, lie.apply_ties(eps.to(dtype), cfg.invariance), model.invariance.active)
        nll = -model.log_predictive(x.to(dtype), W2, T).gather(1, y[:, None]).mean()
        g_eta, g_w1 = torch.autograd.grad(nll, [eta, W1])
    return g_eta.double(), g_w1.double()


@pytest.mark.parametrize("network", ["relu", "mlp"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_gradients_of_eta_and_w1_match_float64(network, precision):
    ref_eta, ref_w1 = _gradients(network, "fp32", torch.float64)
    g_eta, g_w1 = _gradients(network, precision, torch.float32)
    assert (g_eta - ref_eta).norm() / ref_eta.norm() < TOLERANCE[precision]
    assert (g_w1 - ref_w1).norm() / ref_w1.norm() < TOLERANCE[precision]
    if precision == "bf16":  # the products did run in bfloat16: not the float32 numbers
        assert not torch.equal(g_w1, _gradients(network, "fp32", torch.float32)[1])


def test_fp32_leaves_the_products_as_they_were():
    cfg = Config(hidden=16, samples=2).validate()
    pyro.set_rng_seed(0)
    model, _ = build_model(cfg, (1, 28, 28), 10)
    assert model.features.product_dtype is None


def test_auto_resolves_by_the_device(monkeypatch):
    assert resolve_precision("fp32", "cpu") == "fp32" and resolve_precision("bf16", "cpu") == "bf16"
    assert resolve_precision("auto", "cpu") == ("bf16" if native_bf16("cpu") else "fp32")
    with pytest.raises(ValueError, match="precision 'fp16' is not one of fp32, bf16, auto"):
        resolve_precision("fp16", "cpu")
