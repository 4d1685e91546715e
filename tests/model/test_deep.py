"""The deeper networks: the transforms act on the first layer only (mlp) or on the inputs (cnn)."""
import pytest
import torch

from pyroinv.errors import ConfigError
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


def test_the_cnn_body_in_channels_last_is_the_textbook_body_with_the_same_gradients():
    torch.manual_seed(0)
    cnn = ConvFeatures((1, 12, 12), Invariance("rotation", init=1.0), hidden=5, channels=(3, 4))
    assert cnn.conv1.weight.is_contiguous(memory_format=torch.channels_last)
    x = torch.rand(6, 1, 12, 12, requires_grad=True)
    ws = [cnn.conv1.weight, cnn.conv1.bias, cnn.conv2.weight, cnn.conv2.bias, cnn.fc.weight]

    def textbook(images):  # conv, ReLU, then pooling, in the default (contiguous) layout
        h = torch.nn.functional.conv2d(images, ws[0].contiguous(), ws[1], padding=2)
        h = torch.nn.functional.max_pool2d(torch.relu(h), 2)
        h = torch.nn.functional.max_pool2d(torch.relu(torch.nn.functional.conv2d(h, ws[2].contiguous(), ws[3],
                                                                                 padding=2)), 2)
        return torch.relu(cnn.fc(h.flatten(1)))

    out, ref = cnn.body(x), textbook(x)
    assert torch.allclose(out, ref, atol=1e-6)
    g = torch.autograd.grad(out.square().sum(), [x, *ws])
    g_ref = torch.autograd.grad(ref.square().sum(), [x, *ws])
    for a, b in zip(g, g_ref):
        assert torch.allclose(a, b, atol=1e-5)
    again = ConvFeatures((1, 12, 12), Invariance("rotation", init=1.0), hidden=5, channels=(3, 4))
    again.load_state_dict(cnn.state_dict())  # a checkpoint in either layout loads into the channels-last weights
    assert torch.equal(again.body(x), out)


def test_the_tanh_cnn_is_the_same_body_with_tanh_units():
    torch.manual_seed(0)
    relu = ConvFeatures((1, 12, 12), Invariance("rotation", init=1.0), hidden=5, channels=(3, 4))
    cnn = ConvFeatures((1, 12, 12), Invariance("rotation", init=1.0), hidden=5, channels=(3, 4), activation="tanh")
    cnn.load_state_dict(relu.state_dict())
    x = torch.randn(6, 1, 12, 12)
    c = torch.nn.functional
    h = torch.tanh(c.max_pool2d(c.conv2d(x, cnn.conv1.weight, cnn.conv1.bias, padding=2), 2))
    h = torch.tanh(c.max_pool2d(c.conv2d(h, cnn.conv2.weight, cnn.conv2.bias, padding=2), 2))
    out = cnn.body(x)
    assert torch.allclose(out, torch.tanh(cnn.fc(h.flatten(1))), atol=1e-6)
    assert out.min() < 0 and not torch.allclose(out, relu.body(x))  # tanh units go negative; ReLU units do not


def test_an_unknown_cnn_activation_is_one_line():
    with pytest.raises(ConfigError, match="--activation 'gelu' is not one of relu, tanh"):
        ConvFeatures((1, 12, 12), Invariance("rotation", init=1.0), hidden=5, activation="gelu")
