"""The XLA dump importer on stored dumps (tests/data/xla, made by make_fixtures.py; no JAX here)."""

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from mallocgym import evaluate, load, profile
from mallocgym.cli import main
from mallocgym.workloads.xla import find_modules, import_xla_dump, parse_shape

from conftest import DATA

XLA = DATA / "xla"
FIXTURES = ["dot_conv", "rnn_train", "cond_sort"]
MAIN_MODULE = {"dot_conv": "jit_f", "rnn_train": "jit_step", "cond_sort": "jit_f"}


def module_files(folder: Path, module: str) -> tuple[Path, Path, Path]:
    (hlo,) = folder.glob(f"module_*.{module}.cpu_after_optimizations.txt")
    stem = str(hlo)[: -len(".txt")]
    return hlo, Path(stem + "-live-range.txt"), Path(stem + "-buffer-assignment.txt")


def listed_buffers(folder: Path, module: str) -> dict[str, int]:
    """Count the dump's live buffers by hand: every BufferLiveRange line, sized by the buffer
    assignment's value line (non-tuple values are printed there without '{}')."""
    _, live_range, assignment = module_files(folder, module)
    sizes = {}
    for line in assignment.read_text().splitlines():
        m = re.match(r"\s*value: <\d+ (\S+?)( \(phi\))? @\d+> \(size=(\d+),", line)
        if m:
            name = m.group(1) if "{" in m.group(1) else m.group(1) + "{}"
            sizes[name] = int(m.group(3))
    text = live_range.read_text()
    section = text.split("BufferLiveRange:\n")[1].split("\n  Live ranges at")[0]
    names = [line.strip().rsplit(":", 1)[0] for line in section.splitlines()]
    return {name: sizes[name] for name in names if sizes[name] > 0}


def sequence_length(folder: Path, module: str) -> int:
    text = module_files(folder, module)[1].read_text()
    return len(text.split("InstructionSequence:\n")[1].split("\n  BufferLiveRange:")[0].splitlines())


def op_index(workload, name: str) -> int:
    return workload.op_names.index(name)


def buffer_index(workload, name: str) -> int:
    return workload.buffer_names.index(name)


# ------------------------------------------------------------------------------ counts
@pytest.mark.parametrize("fixture", FIXTURES)
def test_fixture_buffer_count_and_bytes_match_the_dump(fixture):
    folder = XLA / fixture
    workload = import_xla_dump(folder)
    listed = listed_buffers(folder, MAIN_MODULE[fixture])
    assert workload.num_buffers == len(listed)
    assert workload.total_bytes == sum(listed.values())
    assert workload.num_ops == sequence_length(folder, MAIN_MODULE[fixture])
    assert workload.name == MAIN_MODULE[fixture]
    slow = evaluate(workload, np.full(workload.num_buffers, -1), profile(fast_capacity=int(workload.size.max())))
    assert slow.time_all_slow > 0


def test_peak_live_bytes_matches_xla_without_aliasing():
    # dot_conv has no aliased values, so XLA's own peak ("8 324 bytes" in the live-range file,
    # at op 7) is ours too.
    workload = import_xla_dump(XLA / "dot_conv")
    assert workload.peak_live_bytes == 8324
    assert int(np.argmax(workload.live_bytes)) == 7


def test_live_ranges_are_the_dumped_ones_clipped_to_the_last_op():
    workload = import_xla_dump(XLA / "dot_conv")
    # "ynn_fusion{}:3-4", "x.1{}:0-8" with 8 ops (max 8): clipped to op 7
    b = buffer_index(workload, "ynn_fusion")
    assert (workload.start[b], workload.end[b]) == (3, 4)
    b = buffer_index(workload, "x.1")
    assert (workload.start[b], workload.end[b]) == (0, 7)


# ------------------------------------------------------------------------------ module choice
def test_largest_module_by_default_and_module_by_name():
    folder = XLA / "dot_conv"
    assert {m.short_name for m in find_modules(folder)} == {"jit_f", "jit_broadcast_in_dim"}
    assert import_xla_dump(folder).name == "jit_f"
    small = import_xla_dump(folder, module="jit_broadcast_in_dim", name="bcast")
    assert small.name == "bcast"
    assert small.num_buffers == len(listed_buffers(folder, "jit_broadcast_in_dim")) == 2
    assert small.total_bytes == 2048 + 4
    same = import_xla_dump(folder, module="module_0002.jit_broadcast_in_dim")
    assert same.total_bytes == small.total_bytes
    with pytest.raises(ValueError, match="no module named 'jit_g'.*module_0008.jit_f"):
        import_xla_dump(folder, module="jit_g")


# ------------------------------------------------------------------------------ flops and bytes
def test_dot_and_convolution_flops_by_hand():
    w = import_xla_dump(XLA / "dot_conv")
    # x[16,32] @ w[32,16] inside the fusion 'ynn_fusion': 2 * (16 * 16 outputs) * 32
    assert w.flops[op_index(w, "ynn_fusion")] == 2 * 16 * 16 * 32
    # conv of [1,8,8,4] with a 3x3x4x8 kernel, SAME: 2 * (1*8*8*8 outputs) * (3*3*4)
    assert w.flops[op_index(w, "conv_general_dilated.1")] == 2 * 512 * 36
    # tanh of 16x16: 256 transcendentals; exp of 1x8x8x8 plus two sums and an add
    assert w.transcendentals[op_index(w, "wrapped_tanh")] == 256
    fused = op_index(w, "reduce_add_fusion")
    assert w.transcendentals[fused] == 512
    assert w.flops[fused] == 512 + 256 + 1
    # parameters, bitcasts: nothing
    assert w.flops[op_index(w, "bitcast")] == 0 and w.flops[op_index(w, "x.1")] == 0


def test_accesses_follow_definitions_and_uses():
    w = import_xla_dump(XLA / "dot_conv")
    conv = op_index(w, "conv_general_dilated.1")
    tanh = buffer_index(w, "wrapped_tanh")
    # defined by wrapped_tanh; read by the convolution through a bitcast and by the final fusion
    assert w.accesses(tanh) == [(op_index(w, "wrapped_tanh"), 1024, True), (conv, 1024, False),
                                (op_index(w, "reduce_add_fusion"), 1024, False)]
    # a parameter is read, never written
    assert w.accesses(buffer_index(w, "k.1")) == [(conv, 1152, False)]


def test_while_body_counts_its_trip_count():
    w = import_xla_dump(XLA / "rnn_train")
    # the forward scan runs 5 times: h[4,16] @ wh[16,16] each time
    assert w.flops[op_index(w, "ynn_fusion")] == 5 * 2 * 4 * 16 * 16
    wh = buffer_index(w, "p__wh__.1")
    reads = {w.op_names[op]: n for op, n, write in w.accesses(wh) if not write}
    assert reads["ynn_fusion"] == 5 * 16 * 16 * 4
    # the final update reads it once, outside the loops
    assert reads["multiply_subtract_fusion.1"] == 16 * 16 * 4


def test_slices_read_only_their_bytes_through_a_conditional():
    w = import_xla_dump(XLA / "cond_sort")
    b = buffer_index(w, "cond.3.clone{0}")  # the conditional's result, f32[64,64]
    reads = {w.op_names[op]: n for op, n, write in w.accesses(b) if not write}
    assert reads == {"slice_bitcast_fusion": 64 * 4,  # one column, sliced inside the fusion
                     "gather_bitcast_fusion": 2 * 64 * 4,  # two gathered rows
                     "bitcast_gather_fusion": 64 * 64 * 4}  # a full permutation: all of it


HAND_HLO = """HloModule tiny, is_scheduled=true

ENTRY %main (a: f32[2,8,16], b: f32[2,16,4]) -> f32[2,8,4] {
  %a = f32[2,8,16]{2,1,0} parameter(0)
  %b = f32[2,16,4]{2,1,0} parameter(1)
  ROOT %d = f32[2,8,4]{2,1,0} dot(f32[2,8,16]{2,1,0} %a, f32[2,16,4]{2,1,0} %b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
"""
HAND_LIVE_RANGE = """HloLiveRange (max 3):
  InstructionSequence:
    0:a
    1:b
    2:d
  BufferLiveRange:
    a{}:0-3
    b{}:0-3
    d{}:2-3
"""
HAND_ASSIGNMENT = """BufferAssignment:
allocation 0: size 1024, parameter 0:
 value: <0 a @0> (size=1024,offset=0): f32[2,8,16]{2,1,0}
allocation 1: size 512, parameter 1:
 value: <1 b @0> (size=512,offset=0): f32[2,16,4]{2,1,0}
allocation 2: size 256, output:
 value: <2 d @0> (size=256,offset=0): f32[2,8,4]{2,1,0}
"""


def test_hand_written_dump_with_inline_operand_shapes(tmp_path):
    # an older text form (operand shapes before the names) and a file name without a platform
    stem = tmp_path / "module_0001.tiny.after_optimizations"
    Path(f"{stem}.txt").write_text(HAND_HLO)
    Path(f"{stem}-live-range.txt").write_text(HAND_LIVE_RANGE)
    Path(f"{stem}-buffer-assignment.txt").write_text(HAND_ASSIGNMENT)
    w = import_xla_dump(tmp_path)
    assert w.name == "tiny" and w.num_ops == 3 and list(w.size) == [1024, 512, 256]
    assert list(w.end) == [2, 2, 2]
    # batched dot: 2 batches x (8 x 4 outputs) x 16 contracted, 2 flops each
    assert list(w.flops) == [0, 0, 2 * (2 * 8 * 4) * 16]
    assert [w.accesses(b) for b in range(3)] == [[(2, 1024, False)], [(2, 512, False)], [(2, 256, True)]]


def test_parse_shape():
    assert parse_shape("f32[16,32]{1,0}").dims == (16, 32)
    assert parse_shape("f32[]").num_elements == 1
    assert parse_shape("bf16[8,128]{1,0:T(8,128)(2,1)}").nbytes == 8 * 128 * 2
    t = parse_shape("(s32[], f32[4,16]{1,0}, /*index=2*/f32[5,4,16]{2,1,0})")
    assert t.is_tuple and [e.dims for e in t.elements] == [(), (4, 16), (5, 4, 16)]
    assert parse_shape("f32[<=10,3]").dims == (10, 3)
    with pytest.raises(ValueError):
        parse_shape("f32[4,x]")


# ------------------------------------------------------------------------------ bad input
def copy_fixture(tmp_path: Path, fixture: str = "dot_conv") -> Path:
    folder = tmp_path / fixture
    shutil.copytree(XLA / fixture, folder)
    return folder


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), start=1) if needle in line)


def test_missing_directory_and_files(tmp_path):
    with pytest.raises(ValueError, match="no such directory"):
        import_xla_dump(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="after_optimizations.txt"):
        import_xla_dump(tmp_path / "empty")
    for which in (1, 2):
        folder = copy_fixture(tmp_path / str(which))
        missing = module_files(folder, "jit_f")[which]
        missing.unlink()
        with pytest.raises(ValueError, match=re.escape(f"{missing}: missing file")):
            import_xla_dump(folder, module="jit_f")


def test_hlo_line_that_does_not_parse(tmp_path):
    folder = copy_fixture(tmp_path)
    hlo = module_files(folder, "jit_f")[0]
    edit(hlo, "%bitcast = f32[1,8,8,4]{3,2,1,0} bitcast(%wrapped_tanh)", "%bitcast = f32[1,8,8,4 bitcast(%wrapped_tanh)")
    line = line_of(hlo, "%bitcast = ")
    with pytest.raises(ValueError, match=re.escape(f"{hlo}:{line}: cannot parse HLO instruction")):
        import_xla_dump(folder)
    folder = copy_fixture(tmp_path / "b")
    hlo = module_files(folder, "jit_f")[0]
    edit(hlo, "ENTRY %main.3", "this is not HLO\nENTRY %main.3")
    line = line_of(hlo, "this is not HLO")
    with pytest.raises(ValueError, match=re.escape(f"{hlo}:{line}: cannot parse HLO line")):
        import_xla_dump(folder)


def test_live_range_naming_an_unknown_value(tmp_path):
    folder = copy_fixture(tmp_path)
    live_range = module_files(folder, "jit_f")[1]
    edit(live_range, "    k.1{}:0-8\n", "    k.1{}:0-8\n    ghost.7{}:2-5\n")
    line = line_of(live_range, "ghost.7")
    with pytest.raises(ValueError, match=re.escape(f"{live_range}:{line}: live range names value ghost.7{{}}")):
        import_xla_dump(folder)


@pytest.mark.parametrize("which, old, new, needle, message", [
    (1, "    ynn_fusion{}:3-4\n", "    ynn_fusion{}:3to4\n", "3to4", "cannot parse live-range line"),
    (1, "    5:bitcast\n", "    5:nosuchop\n", "nosuchop", "instruction 'nosuchop' is not defined"),
    (1, "    ynn_fusion{}:3-4\n", "    ynn_fusion{}:5-4\n", "5-4", "live range 5-4 of ynn_fusion{} is not inside"),
    (2, "value: <22 k.1 @0> (size=1152,", "value: <22 k.1 @0> (size=big,", "size=big", "cannot parse value line"),
])
def test_bad_live_range_and_buffer_assignment_lines(tmp_path, which, old, new, needle, message):
    folder = copy_fixture(tmp_path)
    path = module_files(folder, "jit_f")[which]
    edit(path, old, new)
    line = line_of(path, needle)
    with pytest.raises(ValueError, match=re.escape(f"{path}:{line}: {message}")):
        import_xla_dump(folder)


# ------------------------------------------------------------------------------ command line
def test_cli_import_xla(capsys, tmp_path):
    out = tmp_path / "w.npz"
    code = main(["import", "xla", str(XLA / "rnn_train"), "-o", str(out), "--module", "jit_step"])
    assert code == 0 and "wrote" in capsys.readouterr().out
    saved, direct = load(out), import_xla_dump(XLA / "rnn_train")
    assert saved.num_buffers == direct.num_buffers
    np.testing.assert_array_equal(saved.flops, direct.flops)
    np.testing.assert_array_equal(saved.access_bytes, direct.access_bytes)


def test_cli_import_xla_bad_input_writes_nothing(capsys, tmp_path):
    folder = copy_fixture(tmp_path)
    edit(module_files(folder, "jit_f")[1], "    k.1{}:0-8\n", "    k.1{}:0-8\n    ghost.7{}:2-5\n")
    out = tmp_path / "w.json"
    code = main(["import", "xla", str(folder), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and out.exists() is False and not list(tmp_path.glob(".w.json*"))
    assert err.count("\n") == 1 and "ghost.7" in err and "Traceback" not in err
