"""bfloat16 products (pyroinv.model.precision): the gradients of eta and W1 against float64, for both precisions,
with stated tolerances; float32 unchanged to the bit; auto resolves by the processor."""
import contextlib

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
    # the paper's first layer (unstandardised), on which the tolerances were measured
    cfg = Config(network=network, hidden=64, samples=4, init_eta=40.0, precision=precision, w1_standardize=False,
                 **extra).validate()
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
    from pyroinv.model import precision

    for flags, chosen in ((frozenset({"avx2"}), "fp32"), (frozenset({"avx512_bf16"}), "bf16"), (frozenset({"amx_bf16"}), "bf16")):
        monkeypatch.setattr(precision, "_cpu_flags", lambda flags=flags: flags)
        assert resolve_precision("auto", "cpu") == chosen  # a processor without native bfloat16 keeps float32


def test_bf16_without_native_products_warns_and_is_kept(monkeypatch):
    import warnings

    from pyroinv.model import precision

    monkeypatch.setattr(precision, "_cpu_flags", lambda: frozenset({"avx2"}))
    with pytest.warns(UserWarning, match="no native bfloat16 products .* precision 'auto' picks float32 here"):
        assert resolve_precision("bf16", "cpu") == "bf16"  # what was asked for, said to be slow
    monkeypatch.setattr(precision, "_cpu_flags", lambda: frozenset({"amx_bf16"}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_precision("bf16", "cpu") == "bf16"



def _guide(dtype: torch.dtype):
    from pyroinv.model.guides import ClassCholeskyGuide

    g = torch.Generator().manual_seed(0)
    guide = ClassCholeskyGuide(10, 65, init_scale=0.9, estimator="local").to(dtype)
    with torch.no_grad():
        guide.offdiag.copy_(torch.randn(10, 65, 65, generator=g, dtype=torch.float64))
        guide.loc_unconstrained.copy_(torch.randn(10, 65, generator=g, dtype=torch.float64))
    return guide


def _draw_gradients(product_dtype: torch.dtype | None, dtype: torch.dtype, plain: bool) -> list[torch.Tensor]:
    """``W2 = mu + L eps`` for 32 fixed ``eps`` per class, by the fast path's product or the plain formula, and
    the gradients of ``mu``, ``L``'s diagonal and its lower part of a fixed function of it."""
    from pyroinv.model import kernels
    from pyroinv.model.precision import mm

    g = torch.Generator().manual_seed(1)
    eps = torch.randn(32, 10, 65, generator=g, dtype=torch.float64).to(dtype)
    weights = torch.randn(32, 10, 65, generator=g, dtype=torch.float64).to(dtype)
    guide = _guide(dtype)
    params = [guide.loc_unconstrained, guide.diag_unconstrained, guide.offdiag]
    with local_params():
        L = guide.scale_tril()
        noise = mm(L, eps.unsqueeze(-1), product_dtype).squeeze(-1) if plain else kernels.scaled_noise(
            L, eps, product_dtype
        )
        w2 = guide.loc + noise
        return [w2, *torch.autograd.grad(torch.tanh(w2 * weights).sum(), params)]


@pytest.mark.parametrize("plain", [False, True])
def test_the_guides_bf16_draw_and_its_gradients_match_float64(plain):
    """Under bf16 the draw's product ``L eps`` takes bfloat16 operands (float32 result): its value and the gradients
    of ``mu``, ``L``'s diagonal and its lower part within bfloat16's tolerance of float64, and not float32's
    numbers."""
    ref = _draw_gradients(None, torch.float64, plain)
    fp32 = _draw_gradients(None, torch.float32, plain)
    bf16 = _draw_gradients(torch.bfloat16, torch.float32, plain)
    for r, a, b in zip(ref, fp32, bf16):
        assert (a.double() - r).norm() / r.norm() < TOLERANCE["fp32"]
        assert (b.double() - r).norm() / r.norm() < TOLERANCE["bf16"]
        assert b.dtype == torch.float32
    assert not torch.equal(fp32[0], bf16[0])


@pytest.mark.parametrize("path", ["rsample", "rsample-plain", "reparam"])
def test_every_draw_of_the_guide_takes_its_product_dtype(path):
    """The guide's ``rsample`` (fast and plain) and the reparameterised draw of training compute
    ``mu + L eps`` with the guide's product dtype; fp32 leaves them as they were."""
    from pyroinv.model import kernels

    for product_dtype in (None, torch.bfloat16):
        guide = _guide(torch.float32)
        guide.product_dtype = product_dtype
        with local_params(), torch.no_grad():
            q = guide.distribution().expand((32, 10))
            torch.manual_seed(2)
            eps = torch.randn(32, 10, 65)
            expected = q.loc + kernels.scaled_noise(q._unbroadcasted_scale_tril, eps, product_dtype)
            torch.manual_seed(2)
            if path == "reparam":
                msg = {"fn": q, "value": None, "is_observed": False, "name": "W2"}
                w2 = kernels.CholeskyNoiseReparam().apply(msg)["value"]  # type: ignore[arg-type]
            else:
                with kernels.plain() if path == "rsample-plain" else contextlib.nullcontext():
                    w2 = q.rsample()
        torch.testing.assert_close(w2, expected, rtol=1e-5, atol=1e-5)
        if product_dtype is not None:  # not float32's draw
            assert (w2 - (q.loc + kernels.scaled_noise(q._unbroadcasted_scale_tril, eps))).abs().max() > 1e-4


def test_the_precision_reaches_the_guides_draw():
    for precision, dtype in (("fp32", None), ("bf16", torch.bfloat16)):
        cfg = Config(hidden=16, samples=2, precision=precision).validate()
        pyro.set_rng_seed(0)
        _, guide = build_model(cfg, (1, 28, 28), 10)
        assert guide.product_dtype is dtype and guide.distribution().product_dtype is dtype
