"""Malformed input raises llga.ParseError at the right line:column; never a crash."""

import pathlib
import random
import re

import pytest

import corpus
import llga

ERRORS_FILE = pathlib.Path(__file__).resolve().parents[1] / "ir" / "parse_errors.ir"
CHECK = re.compile(rb"^# CHECK: error: parse_errors\.ir:(\d+):(\d+): (.*)$", re.M)


def error_cases():
    # Each case starts on the line after its "# -----" marker and keeps its last newline.
    cases = re.split(rb"^# -----\n", ERRORS_FILE.read_bytes(), flags=re.M)[1:]
    out = []
    for case in cases:
        m = CHECK.search(case)
        assert m, case[:200]
        out.append(pytest.param(case, int(m[1]), int(m[2]), m[3].decode(), id=m[3].decode()[:40]))
    return out


CASES = error_cases()


def test_there_are_many_cases():
    assert len(CASES) >= 30


@pytest.mark.parametrize("text,line,column,message", CASES)
def test_malformed_input(text, line, column, message):
    with pytest.raises(llga.ParseError) as info:
        llga.parse(text, filename="parse_errors.ir")
    e = info.value
    assert (e.line, e.column) == (line, column)
    assert e.message == message
    assert f"parse_errors.ir:{line}:{column}: {message}" in str(e)
    assert "^" in str(e)  # a caret under the excerpt


def test_truncations_of_a_real_dump():
    text = corpus.dumps("resnet18")["inlined"][0]
    last_paren = text.rindex(")")
    points = sorted(set(range(0, last_paren, max(1, last_paren // 400))))
    for n in points:
        with pytest.raises(llga.ParseError):
            llga.parse(text[:n])


def test_random_corruption_never_crashes():
    text = corpus.dumps("squeezenet1_0")["frozen"][0].encode()
    rng = random.Random(7)
    parsed = failed = 0
    for _ in range(300):
        data = bytearray(text)
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(data))
            op = rng.randrange(3)
            if op == 0:
                data[i] = rng.randrange(256)
            elif op == 1:
                del data[i:i + rng.randint(1, 20)]
            else:
                data[i:i] = bytes([rng.choice(b"()[]{}%:=,#\"<>-.\n")])
        try:
            g = llga.parse(bytes(data))
            assert g.verify() == []
            llga.parse(str(g))
            parsed += 1
        except llga.ParseError:
            failed += 1
    assert failed > 100


def test_parse_rejects_non_text():
    with pytest.raises(TypeError, match="IR text"):
        llga.parse(42)
