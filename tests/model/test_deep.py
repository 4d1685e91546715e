"""The deeper networks: the transforms act on the first layer only (mlp) or on the inputs (cnn)."""
import torch

from pyroinv.model.deep import ConvFeatures, DeepMLPFeatures
from pyroinv.model.invariance import Invariance
from pyroinv.model.networks import InvariantFeatures
from pyroinv.model.warp import warp_images


def test_the_mlp_is_its_first_layer_then_relu_layers_and_a_constant():
    torch.manual_seed(0)
    first = InvariantFeatures((1, 10, 10), Invariance("rotation", init=0.7), hidden=6)
    mlp = DeepMLPFeatures(first, depth=3, init_scale=0.5)
    x, T = torch.rand(4, 1, 10, 10), first.invariance.sample_transforms(5)
    h = first(x, T)[..., :-1]
    for layer in mlp.layers:
        h = torch.relu(h @ layer.weight.T + layer.bias)
    assert len(mlp.layers) == 2
    assert torch.allclose(mlp(x, T)[..., :-1], h, atol=1e-6)
    assert mlp.W1 is first.W1 and mlp.hidden == 6 and mlp.invariance is first.invariance


def test_the_cnn_is_its_body_on_the_warped_inputs():
    torch.manual_seed(0)
    cnn = ConvFeatures((1, 12, 12), Invariance("rotation", init=1.0), hidden=5, channels=(3, 4))
    x, T = torch.rand(2, 1, 12, 12), cnn.invariance.sample_transforms(3)
    out = cnn(x, T)
    for s in range(3):
        expected = cnn.body(warp_images(x, T[s].expand(2, 3, 3)))
        assert torch.allclose(out[s, :, :-1], expected, atol=1e-6)


def test_the_cnn_averaged_over_a_full_rotation_grid_barely_sees_a_rotation_of_the_input():
    torch.manual_seed(0)
    cnn = ConvFeatures((1, 16, 16), Invariance("rotation", init=179.0 * torch.pi / 180, learn=False), hidden=8,
                       channels=(4, 4))
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, 16), torch.linspace(-1, 1, 16), indexing="ij")
    blob = torch.exp(-((xx - 0.3) ** 2 + (yy + 0.2) ** 2) / 0.05).view(1, 1, 16, 16)   # off-centre, inside the disc
    quarter = torch.rot90(blob, 1, (2, 3))
    grid = cnn.invariance.sample_transforms(72, "deterministic")
    a, b = cnn(blob, grid).mean(0), cnn(quarter, grid).mean(0)
    none = Invariance("rotation", init=1e-4, learn=False).sample_transforms(1)
    raw_gap = (cnn(blob, none) - cnn(quarter, none)).norm()
    assert (a - b).norm() < 0.2 * raw_gap
