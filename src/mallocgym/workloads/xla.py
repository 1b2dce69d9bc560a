"""Import a program compiled by XLA from a dump directory.

Dump a JAX (or TensorFlow) program with::

    XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_as_text --xla_dump_buffer_assignment_analysis"

and read it with :func:`import_xla_dump`. Three files of one module are used (``P`` is
``module_NNNN.NAME.cpu_after_optimizations``, or the platform's equivalent):

- ``P.txt``, the scheduled HLO after optimizations: each instruction's shape, opcode, operands
  and attributes, from which come flops (dot and convolution from their dimension numbers, also
  inside fusions; one per output element for elementwise ops), transcendentals (``exp``,
  ``tanh``, ...), and which buffers each instruction reads and writes;
- ``P-live-range.txt``, XLA's ``HloLiveRange``: the flattened schedule (``InstructionSequence``,
  the ops of the workload in order, while-loop bodies and conditional branches inlined) and one
  ``BufferLiveRange`` line ``name{index}:start-end`` per buffer;
- ``P-buffer-assignment.txt``: the size of every value (``value: <id name{index} @color>
  (size=..,offset=..)``).

Every buffer of the live-range file with a non-zero size becomes a buffer. Op ``t`` of the
sequence writes the buffers it defines (except parameters, constants and the values that
``while``/``conditional``/``get-tuple-element``/``bitcast`` only forward) and reads the buffers
its operands resolve to (through ``bitcast``, ``get-tuple-element``, ``tuple``, loop parameters
and loop results). A read or write moves the whole buffer, except through ``slice``,
``dynamic-slice`` and ``gather`` (the bytes of the slice) and ``dynamic-update-slice`` (in place:
the bytes of the update). Ops in a while-loop body with a known trip count ``n`` are counted
``n`` times (flops and bytes). Live ranges ending at the end of the program (outputs,
parameters) are clipped to the last op. See ``docs/suite.md``.

Bad input (a missing file, an HLO line that does not parse, a live range naming a value the
buffer assignment does not list) raises one ``ValueError`` naming the file and line.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .core import Workload

__all__ = ["import_xla_dump", "find_modules", "XlaModuleFiles", "parse_shape", "instruction_flops"]

# ------------------------------------------------------------------------------------- files
_HLO_NAME = re.compile(r"^(?P<module>.+?)\.(?:sm_\d+\.\d+_)?(?:[a-z]+_)?after_optimizations\.txt$")
_LIVE_RANGE_LINE = re.compile(r"^\s+(?P<name>[^\s{}]+)\{(?P<index>[\d,\s]*)\}:(?P<start>-?\d+)-(?P<end>-?\d+)\s*$")


@dataclass(frozen=True)
class XlaModuleFiles:
    """The three dump files of one module; ``module`` is ``module_NNNN.NAME``."""

    module: str
    hlo: Path
    live_range: Path
    buffer_assignment: Path

    @property
    def short_name(self) -> str:
        """``NAME`` (the module id without its ``module_NNNN.`` prefix)."""
        return re.sub(r"^module_\d+\.", "", self.module)


def find_modules(dump_dir: str | os.PathLike) -> list[XlaModuleFiles]:
    """Every module in ``dump_dir`` with an after-optimizations HLO text file, sorted by id.

    The live-range and buffer-assignment paths are where they should be; they may not exist.
    """
    root = Path(dump_dir)
    if not root.is_dir():
        raise ValueError(f"{root}: no such directory")
    out = []
    for path in sorted(root.glob("*after_optimizations.txt")):
        match = _HLO_NAME.match(path.name)
        if not match:
            continue
        stem = path.name[: -len(".txt")]
        out.append(XlaModuleFiles(match["module"], path, root / f"{stem}-live-range.txt",
                                  root / f"{stem}-buffer-assignment.txt"))
    return out


def _count_live_ranges(path: Path) -> int:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return sum(1 for line in handle if _LIVE_RANGE_LINE.match(line))


def _select_module(dump_dir: str | os.PathLike, module: str | None) -> XlaModuleFiles:
    modules = find_modules(dump_dir)
    if not modules:
        raise ValueError(f"{dump_dir}: no '*after_optimizations.txt' HLO file (dump with "
                         "--xla_dump_to=DIR --xla_dump_hlo_as_text --xla_dump_buffer_assignment_analysis)")
    if module is not None:
        chosen = [m for m in modules if module in (m.module, m.short_name)]
        if not chosen:
            known = ", ".join(m.module for m in modules)
            raise ValueError(f"{dump_dir}: no module named {module!r}; found: {known}")
        if len(chosen) > 1:
            raise ValueError(f"{dump_dir}: {len(chosen)} modules are named {module!r} "
                             f"({', '.join(m.module for m in chosen)}); give the full id")
        candidates = chosen
    else:
        candidates = [m for m in modules if m.live_range.is_file() and m.buffer_assignment.is_file()]
        if not candidates:
            candidates = modules[:1]
    files = candidates[0]
    for path in (files.live_range, files.buffer_assignment):
        if not path.is_file():
            raise ValueError(f"{path}: missing file (dump with --xla_dump_buffer_assignment_analysis)")
    if len(candidates) > 1:
        sizes = [_count_live_ranges(m.live_range) for m in candidates]
        files = candidates[max(range(len(candidates)), key=lambda i: (sizes[i], -i))]
    return files


# ------------------------------------------------------------------------------------ shapes
_DTYPE_BYTES = {
    "pred": 1, "s2": 1, "u2": 1, "s4": 1, "u4": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2,
    "bf16": 2, "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16,
    "token": 0, "opaque": 0,
}


@dataclass(frozen=True)
class Shape:
    """An HLO shape: an array ``dtype[dims]`` or a tuple of shapes (``elements``)."""

    dtype: str = ""
    dims: tuple[int, ...] = ()
    elements: tuple["Shape", ...] | None = None

    @property
    def is_tuple(self) -> bool:
        return self.elements is not None

    @property
    def num_elements(self) -> int:
        return math.prod(self.dims) if not self.is_tuple else 0

    @property
    def nbytes(self) -> int:
        """Bytes of an array (sub-byte and fp8 types count one byte per element)."""
        if self.is_tuple:
            return sum(e.nbytes for e in self.elements)
        per = _DTYPE_BYTES.get(self.dtype, 1 if self.dtype.startswith("f8") else 4)
        return self.num_elements * per


_ARRAY = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\]")


def _skip_braces(text: str, i: int) -> int:
    """Index after the balanced ``{...}`` group starting at ``text[i] == '{'``."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    raise ValueError("unbalanced '{'")


def _parse_shape_at(text: str, i: int) -> tuple[Shape, int]:
    while i < len(text) and text[i] == " ":
        i += 1
    if i < len(text) and text[i] == "(":
        elements = []
        i += 1
        while True:
            while i < len(text) and text[i] == " ":
                i += 1
            if i < len(text) and text[i] == ")":
                return Shape(elements=tuple(elements)), i + 1
            shape, i = _parse_shape_at(text, i)
            elements.append(shape)
            while i < len(text) and text[i] == " ":
                i += 1
            if i < len(text) and text[i] == ",":
                i += 1
            elif i < len(text) and text[i] == ")":
                return Shape(elements=tuple(elements)), i + 1
            else:
                raise ValueError("bad tuple shape")
    match = _ARRAY.match(text, i)
    if not match:
        raise ValueError("bad shape")
    dims = []
    for part in match[2].split(","):
        part = part.strip().lstrip("<=")
        if part:
            if not part.isdigit():
                raise ValueError(f"bad dimension {part!r}")
            dims.append(int(part))
    i = match.end()
    if i < len(text) and text[i] == "{":
        i = _skip_braces(text, i)
    return Shape(match[1], tuple(dims)), i


def parse_shape(text: str) -> Shape:
    """Parse an HLO shape such as ``f32[16,32]{1,0}`` or ``(s32[], f32[4]{0})``."""
    text = _strip_comments(text)
    shape, end = _parse_shape_at(text, 0)
    if text[end:].strip():
        raise ValueError(f"trailing text after shape: {text[end:]!r}")
    return shape


def _strip_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/", "", text)


# ------------------------------------------------------------------------------------ HLO text
_INSTR_HEAD = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[^\s=%]+)\s*=\s*")
_OPCODE = re.compile(r"\s*(?P<opcode>[A-Za-z][\w\-$.]*)\(")
_COMPUTATION = re.compile(r"^(?P<entry>ENTRY\s+)?%?(?P<name>[^\s(%]+)\s*(?:\(.*\)\s*->.*)?\{$")
_OPERAND = re.compile(r"%?(?P<name>[A-Za-z_][\w.\-]*)$")
_LITERAL_OPS = frozenset({"constant", "parameter", "iota", "rng-get-and-update-state", "partition-id",
                          "replica-id", "after-all"})


@dataclass
class Instruction:
    """One HLO instruction."""

    name: str
    shape: Shape
    opcode: str
    operands: tuple[str, ...]
    attrs: str
    computation: str
    line: int
    literal: str = ""

    def attr(self, key: str) -> str | None:
        """The raw text of attribute ``key=...`` (a ``{...}`` group or one token)."""
        match = re.search(rf"(?:^|[\s,]){re.escape(key)}=", self.attrs)
        if not match:
            return None
        i = match.end()
        if i < len(self.attrs) and self.attrs[i] == "{":
            return self.attrs[i:_skip_braces(self.attrs, i)]
        end = re.match(r"[^,\s]*", self.attrs[i:]).end()
        return self.attrs[i:i + end]

    def called(self, key: str) -> list[str]:
        """Computation names of attribute ``key`` (``calls=%c`` or ``branch_computations={%a, %b}``)."""
        raw = self.attr(key)
        if raw is None:
            return []
        return [p.strip().lstrip("%") for p in raw.strip("{}").split(",") if p.strip()]

    def int_list(self, key: str) -> list[int]:
        raw = self.attr(key)
        if raw is None:
            return []
        return [int(p) for p in raw.strip("{}").split(",") if p.strip()]


@dataclass
class HloModule:
    """The computations of an HLO module: instructions by name, in text order per computation,
    and each computation's ROOT."""

    path: Path
    entry: str = ""
    computations: dict[str, list[Instruction]] = field(default_factory=dict)
    instructions: dict[str, Instruction] = field(default_factory=dict)
    roots: dict[str, Instruction] = field(default_factory=dict)
    users_cache: dict[str, dict] = field(default_factory=dict, repr=False)

    def root(self, computation: str) -> Instruction:
        """The ROOT instruction of ``computation`` (its last one if none is marked)."""
        return self.roots.get(computation) or self.computations[computation][-1]


def _split_operands(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current))
    return [p.strip() for p in parts]


def _matching_paren(text: str, i: int) -> int:
    """Index of the ``)`` closing the ``(`` at ``text[i]``; quotes are skipped."""
    depth, quoted = 0, False
    for j in range(i, len(text)):
        ch = text[j]
        if quoted:
            if ch == '"' and text[j - 1] != "\\":
                quoted = False
            continue
        if ch == '"':
            quoted = True
        elif ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
            if depth == 0:
                return j
    raise ValueError("unbalanced '('")


def _parse_instruction(line: str, computation: str, line_no: int) -> Instruction:
    text = _strip_comments(line)
    head = _INSTR_HEAD.match(text)
    if not head:
        raise ValueError("expected 'name = shape opcode(operands)'")
    shape, i = _parse_shape_at(text, head.end())
    op = _OPCODE.match(text, i)
    if not op:
        raise ValueError("expected an opcode after the shape")
    open_at = op.end() - 1
    close_at = _matching_paren(text, open_at)
    inside = text[open_at + 1:close_at]
    attrs = text[close_at + 1:].lstrip(", ")
    opcode = op["opcode"]
    operands: list[str] = []
    literal = ""
    if opcode in _LITERAL_OPS:
        literal = inside.strip()
    else:
        for part in _split_operands(inside):
            match = _OPERAND.search(part)
            if not match:
                raise ValueError(f"bad operand {part!r}")
            operands.append(match["name"])
    return Instruction(head["name"], shape, opcode, tuple(operands), attrs, computation, line_no, literal)


def parse_hlo(path: str | os.PathLike) -> HloModule:
    """Parse an HLO text file (``HloModule ...`` then computations); errors name file and line."""
    path = Path(path)
    module = HloModule(path)
    current: str | None = None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason})") from None
    if not lines or not lines[0].startswith("HloModule"):
        raise ValueError(f"{path}:1: expected the 'HloModule' header line")
    for line_no, raw in enumerate(lines, start=1):
        line = raw.strip()
        if current is None:
            if not line or line.startswith(("HloModule", "//")) or re.fullmatch(r"[A-Za-z]+", line) \
                    or line[0].isdigit():
                continue
            match = _COMPUTATION.match(line)
            if not match:
                raise ValueError(f"{path}:{line_no}: cannot parse HLO line {_clip(line)}")
            current = match["name"]
            if current in module.computations:
                raise ValueError(f"{path}:{line_no}: computation {current!r} is defined twice")
            module.computations[current] = []
            if match["entry"]:
                module.entry = current
            continue
        if line == "}":
            if not module.computations[current]:
                raise ValueError(f"{path}:{line_no}: computation {current!r} is empty")
            current = None
            continue
        if not line:
            continue
        try:
            instr = _parse_instruction(raw, current, line_no)
        except ValueError as exc:
            raise ValueError(f"{path}:{line_no}: cannot parse HLO instruction ({exc}): {_clip(line)}") from None
        if instr.name in module.instructions:
            raise ValueError(f"{path}:{line_no}: instruction {instr.name!r} is defined twice")
        module.instructions[instr.name] = instr
        module.computations[current].append(instr)
        if line.startswith("ROOT"):
            module.roots[current] = instr
    if current is not None:
        raise ValueError(f"{path}:{len(lines)}: computation {current!r} is not closed with '}}'")
    if not module.entry:
        raise ValueError(f"{path}: no ENTRY computation")
    return module


def _clip(line: str, width: int = 120) -> str:
    return repr(line if len(line) <= width else line[:width] + "...")


# ---------------------------------------------------------------------------------- live range
@dataclass(frozen=True)
class LiveRange:
    """One ``BufferLiveRange`` line: value ``name{index}`` live over ``[start, end]``."""

    name: str
    index: tuple[int, ...]
    start: int
    end: int
    line: int


def parse_live_range(path: str | os.PathLike) -> tuple[list[tuple[str, int]], list[LiveRange]]:
    """The flattened instruction sequence (``(name, line)`` per op) and the buffer live ranges of
    an ``HloLiveRange`` dump."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or not re.match(r"^HloLiveRange \(max -?\d+\):\s*$", lines[0]):
        raise ValueError(f"{path}:1: expected 'HloLiveRange (max N):'")
    sequence: list[tuple[str, int]] = []
    ranges: list[LiveRange] = []
    section = None
    for line_no, line in enumerate(lines[1:], start=2):
        stripped = line.strip()
        if stripped in ("InstructionSequence:", "BufferLiveRange:"):
            section = stripped
            continue
        if section is None:
            continue
        if not line.startswith("    "):  # a two-space heading ("Live ranges at ...") ends a section
            section = None
            continue
        if section == "InstructionSequence:":
            match = re.fullmatch(r"(\d+):(\S+)", stripped)
            if not match or int(match[1]) != len(sequence):
                raise ValueError(f"{path}:{line_no}: expected '{len(sequence)}:name', got {_clip(stripped)}")
            sequence.append((match[2], line_no))
        else:
            match = _LIVE_RANGE_LINE.match(line)
            if not match:
                raise ValueError(f"{path}:{line_no}: cannot parse live-range line {_clip(stripped)} "
                                 "(expected 'name{index}:start-end')")
            index = tuple(int(p) for p in match["index"].split(",") if p.strip())
            ranges.append(LiveRange(match["name"], index, int(match["start"]), int(match["end"]), line_no))
    if not sequence:
        raise ValueError(f"{path}: no InstructionSequence entries")
    if not ranges:
        raise ValueError(f"{path}: no BufferLiveRange entries")
    return sequence, ranges


_VALUE_LINE = re.compile(
    r"^\s*value:\s*<\d+\s+(?P<name>[^\s{}>]+)(?:\{(?P<index>[\d,\s]*)\})?(?:\s+\(phi\))?(?:\s+@\d+)?>"
    r"\s*\(size=(?P<size>\d+),offset=(?P<offset>\d+)\)")


def parse_buffer_assignment(path: str | os.PathLike) -> dict[tuple[str, tuple[int, ...]], int]:
    """Size of every value ``(name, index)`` listed on a ``value:`` line of a buffer assignment."""
    path = Path(path)
    sizes: dict[tuple[str, tuple[int, ...]], int] = {}
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.lstrip().startswith("value:"):
                continue
            match = _VALUE_LINE.match(line)
            if not match:
                raise ValueError(f"{path}:{line_no}: cannot parse value line {_clip(line.strip())}")
            index = tuple(int(p) for p in (match["index"] or "").split(",") if p.strip())
            key = (match["name"], index)
            size = int(match["size"])
            if key in sizes and sizes[key] != size:
                raise ValueError(f"{path}:{line_no}: value {_label(*key)} is listed twice with different sizes")
            sizes[key] = size
    if not sizes:
        raise ValueError(f"{path}: no 'value:' lines (is this a buffer-assignment dump?)")
    return sizes


def _label(name: str, index: tuple[int, ...]) -> str:
    return name + "{" + ",".join(map(str, index)) + "}"


# --------------------------------------------------------------------------------------- flops
_TRANSCENDENTAL = frozenset({
    "exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "sqrt", "rsqrt",
    "cbrt", "power", "sine", "cosine", "tan", "atan2", "erf",
})
_ELEMENTWISE = frozenset({
    "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "negate", "abs", "sign",
    "compare", "select", "clamp", "and", "or", "xor", "not", "floor", "ceil", "round-nearest-afz",
    "round-nearest-even", "shift-left", "shift-right-arithmetic", "shift-right-logical", "convert",
    "is-finite", "real", "imag", "complex", "popcnt", "count-leading-zeros", "stochastic-convert",
})


def instruction_flops(module: HloModule, instr: Instruction) -> tuple[float, float]:
    """``(flops, transcendentals)`` of one execution of ``instr``.

    ``dot``: 2 x output elements x product of the lhs contracting dimensions. ``convolution``:
    2 x output elements x kernel elements / output features (padding is not discounted).
    Elementwise ops: one flop (or transcendental) per output element. ``reduce``: one per input
    element; ``reduce-window``: output elements x window size; ``sort``: n log2 n per sorted
    dimension. Fusions and calls: the sum over their computation. Data movement: zero.
    """
    op = instr.opcode
    if op == "fusion":
        total_f = total_t = 0.0
        for comp in instr.called("calls"):
            for inner in module.computations.get(comp, ()):
                f, t = instruction_flops(module, inner)
                total_f += f
                total_t += t
        return total_f, total_t
    out = instr.shape
    if op == "dot":
        lhs = _operand_shape(module, instr, 0)
        k = math.prod(lhs.dims[d] for d in instr.int_list("lhs_contracting_dims")) if lhs else 1
        return 2.0 * out.num_elements * k, 0.0
    if op == "convolution":
        kernel = _operand_shape(module, instr, 1)
        labels = instr.attr("dim_labels") or ""
        out_labels = labels.split("->")[-1] if "->" in labels else ""
        if kernel is None or "f" not in out_labels or out.is_tuple:
            return 0.0, 0.0
        features = out.dims[out_labels.index("f")] if len(out_labels) == len(out.dims) else 1
        return 2.0 * out.num_elements * kernel.num_elements / max(features, 1), 0.0
    if op in _TRANSCENDENTAL:
        return 0.0, float(out.num_elements)
    if op in _ELEMENTWISE:
        return float(out.num_elements), 0.0
    if op == "reduce":
        first = _operand_shape(module, instr, 0)
        n_inputs = max(len(instr.operands) // 2, 1)
        return float(first.num_elements * n_inputs) if first else 0.0, 0.0
    if op == "reduce-window":
        window = re.search(r"size=([\dx]+)", instr.attr("window") or "")
        size = math.prod(int(s) for s in window[1].split("x")) if window else 1
        elements = out.num_elements if not out.is_tuple else out.elements[0].num_elements
        return float(elements * size), 0.0
    if op == "sort":
        first = _operand_shape(module, instr, 0)
        dims = instr.int_list("dimensions")
        if first and dims and first.dims:
            n = first.dims[dims[0]]
            return float(first.num_elements * max(math.log2(max(n, 1)), 1.0)), 0.0
    return 0.0, 0.0


def _operand_shape(module: HloModule, instr: Instruction, k: int) -> Shape | None:
    if k >= len(instr.operands):
        return None
    operand = module.instructions.get(instr.operands[k])
    return operand.shape if operand is not None else None


# ------------------------------------------------------------------------------ bytes accessed
_SLICING = frozenset({"slice", "dynamic-slice", "gather"})


def _users(module: HloModule, computation: str) -> dict[str, list[tuple[Instruction, int]]]:
    cache = module.users_cache
    if computation not in cache:
        users: dict[str, list[tuple[Instruction, int]]] = {}
        for instr in module.computations[computation]:
            for k, name in enumerate(instr.operands):
                users.setdefault(name, []).append((instr, k))
        cache[computation] = users
    return cache[computation]


def _param_bytes(module: HloModule, computation: str, name: str, full: int, depth: int = 0) -> int:
    """Bytes a fused computation reads of its value ``name``: slices read their output, an
    in-place ``dynamic-update-slice`` reads nothing of its target, anything else reads it all."""
    total = 0
    for user, k in _users(module, computation).get(name, ()):
        if user.opcode in _SLICING and k == 0:
            total += user.shape.nbytes
        elif user.opcode == "dynamic-update-slice" and k == 0:
            continue
        elif user.opcode == "bitcast" and depth < 8:
            total += _param_bytes(module, computation, user.name, full, depth + 1)
        else:
            return full
        if total >= full:
            return full
    return total


def _read_bytes(module: HloModule, instr: Instruction, k: int, size: int) -> int:
    if instr.opcode == "fusion":
        for comp in instr.called("calls"):
            params = [p for p in module.computations.get(comp, ()) if p.opcode == "parameter"
                      and p.literal.strip().isdigit() and int(p.literal) == k]
            if params:
                return min(size, _param_bytes(module, comp, params[0].name, size))
        return size
    if instr.opcode in _SLICING and k == 0:
        return min(size, instr.shape.nbytes)
    if instr.opcode == "dynamic-update-slice" and k == 0:
        return 0
    return size


def _write_bytes(module: HloModule, instr: Instruction, index: tuple[int, ...], size: int) -> int:
    node = instr
    if node.opcode == "fusion":
        comps = node.called("calls")
        if not comps or comps[0] not in module.computations:
            return size
        node = module.root(comps[0])
        if node.opcode == "tuple" and index:
            node = module.instructions.get(node.operands[index[0]], node)
        while node.opcode == "bitcast" and node.operands:
            node = module.instructions.get(node.operands[0], node)
            if node.opcode != "bitcast":
                break
    if node.opcode == "dynamic-update-slice" and len(node.operands) > 1:
        update = module.instructions.get(node.operands[1])
        if update is not None:
            return min(size, update.shape.nbytes)
    return size


# ------------------------------------------------------------------------------------ import
# Ops that move no data of their own: they forward buffers or define them without writing.
_FORWARDING = frozenset({"parameter", "constant", "bitcast", "get-tuple-element", "tuple", "while",
                         "conditional", "call", "after-all", "add-dependency", "opt-barrier", "domain"})


_CALLED = ("body", "condition", "to_apply", "branch_computations", "true_computation", "false_computation")


class _Resolver:
    """Maps ``(instruction, shape index)`` to the live-range values it denotes."""

    def __init__(self, module: HloModule, values: set[tuple[str, tuple[int, ...]]]):
        self.module = module
        self.values = values
        self.callers: dict[str, Instruction] = {}  # computation -> the control-flow op calling it
        for instr in module.instructions.values():
            if instr.opcode in ("while", "conditional", "call"):
                for key in _CALLED:
                    for comp in instr.called(key):
                        self.callers[comp] = instr
        self._cache: dict = {}

    def __call__(self, name: str, index: tuple[int, ...] = (), depth: int = 0) -> tuple:
        key = (name, index)
        if key in self.values:
            return (key,)
        if key in self._cache:
            return self._cache[key]
        self._cache[key] = ()  # guards against cycles
        result = self._resolve(name, index, depth) if depth < 64 else ()
        self._cache[key] = result
        return result

    def _resolve(self, name: str, index: tuple[int, ...], depth: int) -> tuple:
        instr = self.module.instructions.get(name)
        if instr is None:
            return ()
        op = instr.opcode
        if op == "bitcast" and instr.operands:
            return self(instr.operands[0], index, depth + 1)
        if op == "get-tuple-element" and instr.operands:
            position = instr.attr("index")
            if position is None or not position.isdigit():
                return ()
            return self(instr.operands[0], (int(position),) + index, depth + 1)
        if op == "tuple":
            if index:
                return self(instr.operands[index[0]], index[1:], depth + 1) if index[0] < len(instr.operands) else ()
            return tuple(v for operand in instr.operands for v in self(operand, (), depth + 1))
        if op == "while" and instr.operands:
            return self(instr.operands[0], index, depth + 1)
        if op == "parameter" and instr.computation != self.module.entry:
            caller = self.callers.get(instr.computation)
            if caller is None or not instr.literal.strip().isdigit():
                return ()
            number = int(instr.literal)
            if caller.opcode == "while":
                return self(caller.operands[0], index, depth + 1) if caller.operands else ()
            if caller.opcode == "call" and number < len(caller.operands):
                return self(caller.operands[number], index, depth + 1)
            if caller.opcode == "conditional":
                branches = caller.called("branch_computations") or (
                    caller.called("true_computation") + caller.called("false_computation"))
                if instr.computation in branches:
                    k = 1 + branches.index(instr.computation)
                    return self(caller.operands[k], index, depth + 1) if k < len(caller.operands) else ()
            return ()
        if op == "call":
            comps = instr.called("to_apply")
            return self(self.module.root(comps[0]).name, index, depth + 1) if comps else ()
        if not index and instr.shape.is_tuple:
            return tuple(v for i in range(len(instr.shape.elements)) for v in self(name, (i,), depth + 1))
        return ()


def _multipliers(module: HloModule) -> dict[str, float]:
    """How many times each computation runs per program run (known while trip counts)."""
    mult = {module.entry: 1.0}
    stack = [module.entry]
    while stack:
        comp = stack.pop()
        for instr in module.computations.get(comp, ()):
            if instr.opcode == "while":
                trips = 1.0
                config = instr.attr("backend_config")
                if config:
                    try:
                        trips = float(json.loads(config)["known_trip_count"]["n"])
                    except (ValueError, KeyError, TypeError):
                        trips = 1.0
                children = [(c, mult[comp] * trips) for c in instr.called("body") + instr.called("condition")]
            elif instr.opcode in ("conditional", "call"):
                children = [(c, mult[comp]) for key in _CALLED[2:] for c in instr.called(key)]
            else:
                continue
            for child, value in children:
                if child not in mult:
                    mult[child] = value
                    stack.append(child)
    return mult


def import_xla_dump(dump_dir: str | os.PathLike, *, module: str | None = None,
                    name: str | None = None) -> Workload:
    """Read one module of an XLA dump directory as a :class:`Workload`.

    Args:
      dump_dir: the ``--xla_dump_to`` directory.
      module: which module (``module_0008.jit_f`` or ``jit_f``); default: the one with the most
        buffer live ranges.
      name: the workload's name (default: the module name, e.g. ``jit_f``).

    Raises:
      ValueError: naming the file and line, for a missing file, an HLO line that does not parse,
        a live range naming a value the buffer assignment does not list, or an instruction
        sequence naming an instruction the HLO text does not define.
    """
    files = _select_module(dump_dir, module)
    hlo = parse_hlo(files.hlo)
    sequence, ranges = parse_live_range(files.live_range)
    sizes = parse_buffer_assignment(files.buffer_assignment)
    return _build(files, hlo, sequence, ranges, sizes, name or files.short_name)


def _build(files: XlaModuleFiles, hlo: HloModule, sequence: list[tuple[str, int]],
           ranges: list[LiveRange], sizes: dict, name: str) -> Workload:
    lr_path = files.live_range
    seq_instr = []
    for op_name, line_no in sequence:
        instr = hlo.instructions.get(op_name)
        if instr is None:
            raise ValueError(f"{lr_path}:{line_no}: instruction {op_name!r} is not defined in {files.hlo.name}")
        seq_instr.append(instr)
    n_ops = len(sequence)
    time_of = {instr.name: t for t, instr in enumerate(seq_instr)}

    buffers: list[LiveRange] = []
    buffer_size: list[int] = []
    seen: set = set()
    for r in ranges:
        key = (r.name, r.index)
        if key not in sizes:
            raise ValueError(f"{lr_path}:{r.line}: live range names value {_label(*key)}, which "
                             f"{files.buffer_assignment.name} does not list")
        if r.name not in hlo.instructions:
            raise ValueError(f"{lr_path}:{r.line}: live range names instruction {r.name!r}, which "
                             f"{files.hlo.name} does not define")
        if key in seen:
            raise ValueError(f"{lr_path}:{r.line}: value {_label(*key)} has two live ranges")
        seen.add(key)
        if r.start < 0 or r.start >= n_ops or r.end < r.start:
            raise ValueError(f"{lr_path}:{r.line}: live range {r.start}-{r.end} of {_label(*key)} is not "
                             f"inside the {n_ops}-op sequence")
        if sizes[key] > 0:
            buffers.append(r)
            buffer_size.append(sizes[key])
    if not buffers:
        raise ValueError(f"{lr_path}: no live buffer of non-zero size")

    ids = {(r.name, r.index): b for b, r in enumerate(buffers)}
    start = [r.start for r in buffers]
    end = [min(r.end, n_ops - 1) for r in buffers]
    resolve = _Resolver(hlo, set(ids))
    mult = _multipliers(hlo)
    op_mult = [mult.get(instr.computation, 1.0) for instr in seq_instr]

    accesses: list[dict[tuple[int, bool], int]] = [dict() for _ in buffers]
    for b, r in enumerate(buffers):
        instr = hlo.instructions[r.name]
        t = time_of.get(r.name)
        if t is None or instr.opcode in _FORWARDING or not start[b] <= t <= end[b]:
            continue
        nbytes = _write_bytes(hlo, instr, r.index, buffer_size[b])
        accesses[b][(t, True)] = int(round(nbytes * op_mult[t]))
    for t, instr in enumerate(seq_instr):
        if instr.opcode in _FORWARDING:
            continue
        for k, operand in enumerate(instr.operands):
            for key in resolve(operand):
                b = ids[key]
                if not start[b] <= t <= end[b]:
                    continue  # XLA's live range does not cover this use: keep the range as dumped
                nbytes = int(round(_read_bytes(hlo, instr, k, buffer_size[b]) * op_mult[t]))
                accesses[b][(t, False)] = max(accesses[b].get((t, False), 0), nbytes)

    flops, trans = [], []
    for t, instr in enumerate(seq_instr):
        f, tr = instruction_flops(hlo, instr)
        flops.append(f * op_mult[t])
        trans.append(tr * op_mult[t])
    per_buffer = [sorted(((op, nbytes, write) for (op, write), nbytes in acc.items()),
                         key=lambda a: (a[0], not a[2])) for acc in accesses]
    try:
        return Workload.from_buffers(
            name, flops, buffer_size, start, end, per_buffer, transcendentals=trans,
            buffer_names=tuple(r.name if not r.index else _label(r.name, r.index) for r in buffers),
            op_names=tuple(op_name for op_name, _ in sequence),
        )
    except ValueError as exc:
        raise ValueError(f"{files.hlo.parent}: {exc}") from None
