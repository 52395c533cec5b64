"""The conv layers of the conv sweep (bench/conv_sweep.py): shapes taken from ResNet-18,
ResNet-50, MobileNetV2 and an audio CNN over a 900x161 spectrogram, each as an ONNX
model of one Conv (with bias) and a Relu, batch 1, float32, seeded random weights.

The set covers 1x1 and 3x3 convs, a 7x7 stem, depthwise convs (``group`` = channels),
strides of 2, a dilation of 2, maps from 7x7 to 900x161 and 1 to 2048 channels.
"Same" padding: ``dilation * (kernel - 1) // 2`` on each side.

>>> layer = LAYERS["resnet18-3x3-64"]
>>> layer.output_hw, f"{layer.flops / 1e6:.0f} MFLOP"
((56, 56), '231 MFLOP')
>>> [n.op_type for n in onnx_model(layer).graph.node]
['Conv', 'Relu']
"""

from __future__ import annotations

import dataclasses

import numpy as np

#: The opset the models are written for.
OPSET = 17
#: The seed of every layer's weights and input.
SEED = 0


@dataclasses.dataclass(frozen=True)
class ConvLayer:
    """One conv: ``channels`` -> ``filters`` over a ``height`` x ``width`` map."""

    name: str
    network: str
    channels: int
    filters: int
    height: int
    width: int
    kernel: int = 3
    stride: int = 1
    dilation: int = 1
    group: int = 1

    @property
    def pad(self) -> int:
        return self.dilation * (self.kernel - 1) // 2

    @property
    def output_hw(self) -> tuple[int, int]:
        reach = self.dilation * (self.kernel - 1)
        return tuple((n + 2 * self.pad - reach - 1) // self.stride + 1
                     for n in (self.height, self.width))  # fmt: skip

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (1, self.channels, self.height, self.width)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return (1, self.filters, *self.output_hw)

    @property
    def flops(self) -> int:
        """2 * N * M * C/group * K * outputs: a multiply and an add per weight and output
        position (the bias and the ReLU not counted)."""
        h, w = self.output_hw
        per_output = self.channels // self.group * self.kernel**2
        return 2 * self.filters * per_output * h * w

    def describe(self) -> str:
        """``'64->128 56x56 3x3/2'``, with ``d2`` for a dilation and ``dw`` for depthwise."""
        text = f"{self.channels}->{self.filters} {self.height}x{self.width} "
        text += f"{self.kernel}x{self.kernel}" + (f"/{self.stride}" if self.stride > 1 else "")
        if self.dilation > 1:
            text += f" d{self.dilation}"
        if self.group == self.channels and self.group > 1:
            text += " dw"
        elif self.group > 1:
            text += f" g{self.group}"
        return text


_LAYERS = [
    ConvLayer("resnet18-stem-7x7s2", "ResNet-18", 3, 64, 224, 224, kernel=7, stride=2),
    ConvLayer("resnet18-3x3-64", "ResNet-18", 64, 64, 56, 56),
    ConvLayer("resnet18-3x3s2-128", "ResNet-18", 64, 128, 56, 56, stride=2),
    ConvLayer("resnet18-3x3-512", "ResNet-18", 512, 512, 7, 7),
    ConvLayer("resnet18-1x1s2-256", "ResNet-18", 128, 256, 28, 28, kernel=1, stride=2),
    ConvLayer("resnet50-1x1-64to256", "ResNet-50", 64, 256, 56, 56, kernel=1),
    ConvLayer("resnet50-1x1-1024to256", "ResNet-50", 1024, 256, 14, 14, kernel=1),
    ConvLayer("resnet50-1x1-512to2048", "ResNet-50", 512, 2048, 7, 7, kernel=1),
    ConvLayer("mobilenetv2-stem-3x3s2", "MobileNetV2", 3, 32, 224, 224, stride=2),
    ConvLayer("mobilenetv2-dw-32", "MobileNetV2", 32, 32, 112, 112, group=32),
    ConvLayer("mobilenetv2-dw-s2-144", "MobileNetV2", 144, 144, 56, 56, stride=2, group=144),
    ConvLayer("mobilenetv2-dw-960", "MobileNetV2", 960, 960, 7, 7, group=960),
    ConvLayer("mobilenetv2-1x1-24to144", "MobileNetV2", 24, 144, 56, 56, kernel=1),
    ConvLayer("audio-3x3-1to32", "audio CNN", 1, 32, 900, 161),
    ConvLayer("audio-3x3-32", "audio CNN", 32, 32, 900, 161),
    ConvLayer("audio-3x3s2-32to64", "audio CNN", 32, 64, 900, 161, stride=2),
    ConvLayer("audio-3x3-d2-64", "audio CNN", 64, 64, 450, 81, dilation=2),
    ConvLayer("audio-3x3-128", "audio CNN", 128, 128, 225, 41),
]
#: Every layer, by name, in the sweep's order.
LAYERS = {layer.name: layer for layer in _LAYERS}
#: ``--quick``: two small layers (a depthwise 3x3 and a strided 1x1).
QUICK = ("mobilenetv2-dw-960", "resnet18-1x1s2-256")


def weights(layer: ConvLayer) -> tuple[np.ndarray, np.ndarray]:
    """The layer's weight (M, C/group, k, k) and bias (M,), seeded, scaled as He's
    initialisation would (so the outputs stay near 1 whatever the fan-in)."""
    rng = np.random.default_rng([SEED, *map(ord, layer.name)])
    fan_in = layer.channels // layer.group * layer.kernel**2
    shape = (layer.filters, layer.channels // layer.group, layer.kernel, layer.kernel)
    w = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
    return w.astype(np.float32), rng.standard_normal(layer.filters).astype(np.float32) * 0.1


def sample(layer: ConvLayer) -> np.ndarray:
    """The layer's input, seeded: the same in every process."""
    rng = np.random.default_rng([SEED + 1, *map(ord, layer.name)])
    return rng.standard_normal(layer.input_shape).astype(np.float32)


def onnx_model(layer: ConvLayer):
    """``y = Relu(Conv(x, W, B))`` as an ONNX ModelProto; input ``x``, output ``y``."""
    from onnx import TensorProto, helper, numpy_helper

    w, b = weights(layer)
    conv = helper.make_node(
        "Conv", ["x", "W", "B"], ["conv"],
        kernel_shape=[layer.kernel] * 2, strides=[layer.stride] * 2,
        dilations=[layer.dilation] * 2, pads=[layer.pad] * 4, group=layer.group,
    )  # fmt: skip
    relu = helper.make_node("Relu", ["conv"], ["y"])
    graph = helper.make_graph(
        [conv, relu], layer.name.replace("-", "_"),
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(layer.input_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(layer.output_shape))],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model
