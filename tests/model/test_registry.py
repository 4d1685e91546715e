"""The network registry: every ``--network`` builds a feature map of the common shape; unknown names are refused."""
import pytest
import torch

from pyroinv.model.input_features import InputAugmentedFeatures
from pyroinv.frontends.train import train_parser
from pyroinv.config import Config
from pyroinv.errors import ConfigError
from pyroinv.inference.build import build_model
from pyroinv.model.deep import ConvFeatures, DeepMLPFeatures
from pyroinv.model.invariance import Invariance
from pyroinv.model.networks import InvariantFeatures
from pyroinv.model.registry import NETWORKS, FeatureSettings, build_features, network


def test_every_network_is_a_cli_choice_and_unknown_names_are_one_line():
    choices = next(a.choices for a in train_parser()._actions if a.dest == "network")
    assert list(choices) == list(NETWORKS) == ["relu", "rff", "mlp", "cnn"]
    with pytest.raises(ConfigError, match=r"^--network 'resnet' is not one of relu, rff, mlp, cnn$"):
        network("resnet")
    with pytest.raises(ConfigError, match="--network 'resnet' is not one of"):
        Config(network="resnet").validate()


@pytest.mark.parametrize("name", list(NETWORKS))
@pytest.mark.parametrize("on_inputs", [False, True])
def test_every_network_gives_S_by_B_by_H_plus_one_features_with_a_constant_last(name, on_inputs):
    torch.manual_seed(0)
    feats = build_features(name, (1, 12, 12), Invariance("rotation", init=0.5), FeatureSettings(hidden=7, depth=2),
                           on_inputs)
    x = torch.rand(5, 1, 12, 12)
    T = feats.invariance.sample_transforms(3)
    out = feats(x, T)
    assert out.shape == (3, 5, 8) and feats.num_features == 8
    assert torch.equal(out[..., -1], torch.ones(3, 5))
    assert torch.allclose(feats.apply_bank(x, feats.weight_bank(T)), out, atol=1e-5)
    out.sum().backward()  # eta and every learned weight get a gradient
    assert feats.invariance.eta_active_unconstrained.grad is not None


def test_where_the_transforms_act():
    inv, s = Invariance("rotation", init=0.5), FeatureSettings(hidden=7, depth=2)
    assert type(build_features("relu", (1, 8, 8), inv, s)) is InvariantFeatures
    assert type(build_features("relu", (1, 8, 8), inv, s, on_inputs=True)) is InputAugmentedFeatures
    mlp = build_features("mlp", (1, 8, 8), inv, s)
    assert isinstance(mlp, DeepMLPFeatures) and type(mlp.first) is InvariantFeatures and mlp.warps_weights
    cnn = build_features("cnn", (1, 8, 8), inv, s)  # a convolution cannot carry a rotation: on the inputs
    assert isinstance(cnn, ConvFeatures) and not cnn.warps_weights and not network("cnn").weight_space


@pytest.mark.parametrize("name", list(NETWORKS))
def test_parameter_counts_of_the_memory_estimate_are_the_networks_own(name):
    cfg = Config(network=name, hidden=9, depth=3, samples=2, inference="map").validate()
    model, _ = build_model(cfg, (1, 12, 12), 10)
    learned = sum(p.numel() for n, p in model.features.named_parameters() if "invariance" not in n)
    settings = FeatureSettings(hidden=9, depth=3, standardize=cfg.standardizes_w1())  # a gain per unit where it is
    assert network(name).parameters(settings, (1, 12, 12)) == learned


def test_the_cnn_takes_its_channels_from_the_configuration():
    cfg = Config(network="cnn", hidden=9, samples=2, inference="map", channels=(3, 5)).validate()
    assert cfg.channels == [3, 5]  # as config.json holds it: a resumed run compares equal
    model, _ = build_model(cfg, (1, 12, 12), 10)
    assert (model.features.conv1.out_channels, model.features.conv2.out_channels) == (3, 5)
    learned = sum(p.numel() for n, p in model.features.named_parameters() if "invariance" not in n)
    assert network("cnn").parameters(FeatureSettings(hidden=9, channels=(3, 5)), (1, 12, 12)) == learned
    assert Config.from_dict({k: v for k, v in cfg.to_dict().items() if k != "channels"}).channels == [16, 32]
    for bad in ([3], [3, 0], [3, 5, 7], [3.5, 5], "35"):
        with pytest.raises(ConfigError, match="--channels takes two positive integers"):
            Config(network="cnn", channels=bad).validate()


def test_the_cnn_refuses_coordinates_and_depth_is_for_the_mlp():
    with pytest.raises(ConfigError, match="--network cnn needs images"):
        build_features("cnn", (2,), Invariance("rotation", image_size=None), FeatureSettings(hidden=4))
    with pytest.raises(ConfigError, match="--depth 1: --network mlp has at least 2 hidden layers"):
        Config(network="mlp", depth=1).validate()
