"""The capture files as data (issue #41): ``launch.json`` (and the hook's ``launch-<pid>.json``),
``seen-<pid>.json``, ``profile-<pid>.json`` (the hook's profile mode) and ``lift.json``, each
checked against a pydantic model of every field the agent reads before any of it is used. The
user's app writes the first three (it may rewrite them: they are its own files), and their values
reach generated source (agent/capture/user_kernel.py), messages, the profile's table and the
replay: a kernel or parameter name must be a Python identifier, a file an existing ``.py`` file,
a grid 1 to 3 positive sizes, a parameter's kind one the replay knows.
Any violation is one :class:`CaptureError` line naming the file and the field.

Unknown fields are kept as they are (a newer hook may add some); only the fields named here are
read as trusted. Each file is read within ``MAX_FILE_BYTES`` and sandbox/untrusted.py's
``MAX_JSON_DEPTH`` (``read``). Imports nothing of the agent but sandbox/untrusted.py.
"""
from __future__ import annotations

import json
import keyword
import math
from pathlib import Path
from typing import Annotated, Literal, Optional, Union

import pydantic
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from swizzleperf.sandbox import untrusted

#: The largest capture file read (a launch of a few thousand parameters is well under 1 MB).
MAX_FILE_BYTES = 16 << 20
#: The torch dtypes a captured tensor may have (``getattr(torch, name)`` in the replay).
DType = Literal["float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                "float8_e5m2fnuz", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "bool", "complex64", "complex128"]


class CaptureError(Exception):
    """The app could not be captured; the message is one line for the user."""


def _identifier(name: str) -> str:
    if not (name.isidentifier() and name.isascii() and not keyword.iskeyword(name)):
        raise ValueError("must be a Python identifier")
    return name


def _tensor_name(name: str) -> str:
    """A tensor parameter, or the base of a descriptor parameter (``desc.base``)."""
    _identifier(name.removesuffix(".base"))
    return name


def _printable(text: str) -> str:
    if not text.isprintable():
        raise ValueError("must be one line of printable characters")
    return text


def _python_file(path: str) -> str:
    file = Path(path)
    if not (file.is_absolute() and file.suffix == ".py" and file.is_file()):
        raise ValueError("must be the absolute path of an existing .py file")
    if file.stat().st_size > untrusted.MAX_KERNEL_BYTES:   # a sparse 6 GiB file took the agent to 12 GB (#41)
        raise ValueError(f"must be a kernel file of at most {untrusted.MAX_KERNEL_BYTES} bytes")
    return path


Identifier = Annotated[StrictStr, Field(max_length=256), AfterValidator(_identifier)]
TensorName = Annotated[StrictStr, Field(max_length=261), AfterValidator(_tensor_name)]
Line = Annotated[StrictStr, Field(max_length=4096), AfterValidator(_printable)]
Count = Annotated[StrictInt, Field(ge=0, le=2**63 - 1)]
Size = Annotated[StrictInt, Field(ge=1, le=2**31 - 1)]
Number = Union[StrictBool, StrictInt, StrictFloat]
Scalar = Union[StrictBool, StrictInt, StrictFloat, Annotated[StrictStr, Field(max_length=4096)]]
Grid = Annotated[list[Size], Field(min_length=1, max_length=3)]
Seconds = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]


class _Data(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class Placed(_Data):
    """Where a snapshot tensor lies in its storage copy."""

    storage: Count
    byte_offset: Count
    dtype: DType
    shape: Annotated[list[Count], Field(max_length=16)]
    stride: Annotated[list[StrictInt], Field(max_length=16)]
    device: Line


class Param(_Data):
    """One argument of the launch, by parameter name; what else it holds depends on ``kind``."""

    name: Identifier
    constexpr: StrictBool = False
    kind: Literal["tensor", "none", "scalar", "tl_dtype", "tensor_descriptor", "unsupported"]
    value: Optional[Scalar] = None
    type: Optional[Line] = None
    base: Optional[TensorName] = None
    descriptor: Optional[dict[Identifier, Union[Scalar, list[StrictInt], None]]] = None
    storage: Optional[Count] = None
    byte_offset: Optional[Count] = None
    dtype: Optional[DType] = None
    shape: Optional[Annotated[list[Count], Field(max_length=16)]] = None
    stride: Optional[Annotated[list[StrictInt], Field(max_length=16)]] = None
    device: Optional[Line] = None

    @pydantic.model_validator(mode="after")
    def _complete(self):
        if self.kind == "tensor":
            Placed.model_validate(self.model_dump(exclude_unset=True))
        elif self.kind == "scalar" and self.value is None:
            raise ValueError(f"scalar {self.name} has no value")
        elif self.kind == "tl_dtype" and not isinstance(self.value, str):
            raise ValueError(f"tl dtype {self.name} has no name")
        elif self.kind == "unsupported" and self.type is None:
            raise ValueError(f"unsupported argument {self.name} has no type")
        elif self.kind == "tensor_descriptor" and (self.base != f"{self.name}.base" or self.descriptor is None):
            raise ValueError(f"descriptor {self.name} must have base {self.name}.base and its fields")
        return self


class Base(Placed):
    name: TensorName
    kind: Literal["tensor"] = "tensor"


class Output(_Data):
    name: TensorName
    write_only: StrictBool = False
    deterministic: StrictBool = True


class Autotuned(_Data):
    kwargs: dict[Identifier, Optional[Scalar]]
    num_warps: Size
    num_stages: Count
    choice: Optional[Line] = None


class LaunchFile(_Data):
    """``launch-<pid>.json`` as the hook writes it (agent/capture/capture_hook.py's ``_write``); the
    agent adds ``app``, ``cwd`` and ``launches_seen`` to the kept ``launch.json``."""

    kernel: Identifier
    file: Annotated[StrictStr, AfterValidator(_python_file)]
    line: Size
    grid: Grid
    programs: Size
    launch_index: Size
    params: Annotated[list[Param], Field(max_length=4096)]
    descriptor_bases: Annotated[list[Base], Field(max_length=4096)] = []
    options: dict[Identifier, Optional[Scalar]] = {}
    autotuned: Optional[Autotuned] = None
    globals: dict[Identifier, Number] = {}
    outputs: Annotated[list[Output], Field(max_length=4096)]
    storage_bytes: list[Count]
    pid: Count
    triton: Optional[Line] = None
    interpreter: StrictBool = False
    launch_wall_s: Optional[Annotated[float, Field(ge=0.0, allow_inf_nan=False)]] = None
    unreplayed: Optional[StrictBool] = None
    app: Optional[StrictStr] = None
    cwd: Optional[StrictStr] = None
    launches_seen: Optional[Count] = None
    cuda_on_cpu: Optional[Line] = None

    @pydantic.model_validator(mode="after")
    def _consistent(self):
        if self.programs != math.prod(self.grid):
            raise ValueError(f"programs {self.programs} is not the grid's {math.prod(self.grid)}")
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError("a parameter name is given twice")
        tensors = {p.name for p in self.params if p.kind == "tensor"} | {b.name for b in self.descriptor_bases}
        stray = [o.name for o in self.outputs if o.name not in tensors]
        if stray:
            raise ValueError(f"output {stray[0]} is not a tensor argument")
        placed = [p for p in self.params if p.kind == "tensor"] + list(self.descriptor_bases)
        if any(p.storage >= len(self.storage_bytes) for p in placed):
            raise ValueError("a tensor names a storage that is not in storage_bytes")
        return self


class LiftFile(_Data):
    """``lift.json``, written by agent/capture/user_kernel.py's ``prepare``."""

    target_name: Identifier
    arg_names: Annotated[list[Identifier], Field(min_length=1)]
    extents: Annotated[list[Identifier], Field(min_length=1, max_length=3)]
    arg_values: list[StrictInt]
    tile_grid: Grid
    probe_values: Optional[list[StrictInt]] = None
    probe_grid: Optional[Grid] = None
    outputs: list[Identifier]
    lines: list[Size]
    notes: list[StrictStr]
    kind: Literal["lifted", "remapped"]
    coordinate_splits: dict[Annotated[StrictStr, Field(pattern=r"^[0-9]{1,2}$")], Size] = {}
    tolerance: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
    tolerance_note: StrictStr
    user_file: StrictStr

    @pydantic.model_validator(mode="after")
    def _consistent(self):
        if len(self.arg_values) != len(self.arg_names) - 1 or (
                self.probe_values is not None and len(self.probe_values) != len(self.arg_values)):
            raise ValueError("the argument values do not match the target's parameters")
        return self


class ProfiledKernel(_Data):
    """One kernel of ``profile-<pid>.json`` (capture_hook.py's ``_profile_entry``): its launches, its
    largest grid with the scalar arguments and pointer names of that launch, its time."""

    kernel: Identifier
    file: Line
    line: Count
    calls: Count
    grid: Annotated[list[Count], Field(min_length=1, max_length=3)]
    programs: Count
    values: dict[Identifier, Optional[Scalar]] = {}
    pointers: Annotated[list[Identifier], Field(max_length=4096)] = []
    globals: dict[Identifier, Number] = {}
    wall_s: Seconds = 0.0
    time_s: Optional[Seconds] = None
    source: Optional[Line] = None


class ProfileFile(_Data):
    """``profile-<pid>.json``, written at the app's exit by the hook's profile mode (``_write_profile``)."""

    pid: Count
    source: Optional[Line] = None
    note: Optional[Annotated[StrictStr, Field(max_length=4096)]] = None   # an exception's text: one line where read
    interpreter: StrictBool = False
    other_device_s: Optional[Seconds] = None
    triton: Optional[Line] = None
    kernels: Annotated[list[ProfiledKernel], Field(max_length=4096)]


class RunningFile(_Data):
    """``running-<pid>.json`` (capture_hook.py's ``_running_launch``): the interpreted launch a process
    was in, and how many of its programs had run."""

    kernel: Identifier
    file: Line
    line: Count
    grid: Annotated[list[Count], Field(max_length=3)] = []
    programs: Count = 0
    done: Count = 0
    started: Seconds
    now: Seconds


Seen = dict[Annotated[StrictStr, Field(max_length=256), AfterValidator(_printable)], Count]
_SEEN = pydantic.TypeAdapter(Seen)


def read(path: Path, model) -> dict:
    """The JSON file at ``path`` checked against ``model`` (a model class or a TypeAdapter), as a
    dict of the fields it had (unknown ones kept).

    Raises:
        CaptureError: one line: not readable, not JSON, or the first field that does not fit.
    """
    path = Path(path)
    try:   # at most MAX_FILE_BYTES read (a file the app grows after a size check is still cut there)
        text = untrusted.read_bounded(path, MAX_FILE_BYTES, "the capture file", follow_links=False).decode("utf-8")
    except untrusted.UntrustedInput as exc:   # too long, not a regular file, a link the app left
        raise CaptureError(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise CaptureError(f"{path} is not a readable capture file ({_short(exc)})") from None
    depth = untrusted.json_depth(text)   # one linear pass, before json.loads recurses into it
    if depth > untrusted.MAX_JSON_DEPTH:
        raise CaptureError(f"{path} nests {depth} levels deep, more than the {untrusted.MAX_JSON_DEPTH} a capture "
                           f"file may have")
    try:   # json.loads, not untrusted.loads: the hook's json.dump writes a NaN or infinite scalar argument as such
        data = json.loads(text)
    except (ValueError, RecursionError, MemoryError) as exc:
        raise CaptureError(f"{path} is not a readable capture file ({_short(exc)})") from None
    try:
        if isinstance(model, pydantic.TypeAdapter):
            return model.validate_python(data)
        return model.model_validate(data).model_dump(exclude_unset=True)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(_short(p, 40) for p in first["loc"]) or "the file"
        found = _short(json.dumps(first.get("input"), default=str)) if "input" in first else ""
        raise CaptureError(f"{path} is not a capture file swizzleperf wrote: {where}: {first['msg']}"
                           + (f", found {found}" if found else "")) from None


def read_seen(path: Path) -> dict:
    """``seen-<pid>.json``: kernel name -> launches."""
    return read(path, _SEEN)


def _short(value, limit: int = 80) -> str:
    text = " ".join(str(value).split())
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= limit else text[:limit] + "..."
