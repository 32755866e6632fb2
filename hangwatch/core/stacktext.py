"""py-spy's dump text as values: threads of frames, each frame a function and a file.

What differs between two processes standing at the same place is dropped: line numbers,
native addresses, thread ids, C++ template and parameter lists, the folder a script runs from.
What is left groups processes across ranks and across nodes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

# `    function (file:line)` or `    function (file)`; a native frame may be `0x7f.. (lib.so)`.
# One reading of py-spy's frame lines for every use of them (core/evidence.py too).
FRAME_LINE = re.compile(r"^\s+(?P<func>\S.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)\s*$")
# `Thread 8225 (idle): "MainThread"`, `Thread 0x7F3A (active+gil)`, `Thread 8858 (idle)`.
_THREAD = re.compile(r'^Thread (?P<tid>0x[0-9A-Fa-f]+|\d+)(?: \((?P<state>[^)]*)\))?'
                     r'(?::\s*"(?P<name>.*)")?')
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
# Library folders: a file under one is named from its package on (`torch/distributed/x.py`).
_LIBRARY_ROOT = re.compile(r".*/(?:site-packages|dist-packages|lib/python\d[\d.]*)/")
_SHARED_OBJECT = re.compile(r"\.so(?:\.[\d.]+)?$|\.c$|\.cc$|\.cpp$")
# A framework run from a source checkout (`/sgl-workspace/sglang/python/sglang/srt/x.py`,
# `/workspace/verl/verl/trainer/x.py`): named from its innermost package folder on, as an
# installed one is, so the stack rules know it and nodes with other checkout folders agree.
_CHECKOUT_PACKAGE = re.compile(
    r".*/(?=(?:torch|vllm|sglang|deepspeed|megatron|verl|ray|transformers|accelerate|lightning|"
    r"pytorch_lightning|jax|flax|datasets|nemo|trl|peft|openrlhf|colossalai|apex|triton|"
    r"safetensors|huggingface_hub|slime|areal|roll|torchtitan|xtuner|llamafactory)/)")
MAX_FUNCTION_CHARS = 160


@dataclass(frozen=True)
class Frame:
    function: str
    file: str
    native: bool = False

    @property
    def text(self) -> str:
        return f"{self.function} ({self.file})"


@dataclass(frozen=True)
class Thread:
    tid: int
    name: str | None
    active: bool
    frames: tuple[Frame, ...]  # innermost first, as py-spy prints them


def parse_dump(text: str) -> tuple[Thread, ...]:
    """Every thread of one `py-spy dump`, frames normalised; other lines are ignored (the
    `Process N:` header and its command line, `Python v3.x`, `--locals` variables)."""
    threads: list[Thread] = []
    head: tuple[int, str | None, bool] | None = None
    frames: list[Frame] = []
    for line in text.splitlines():
        if (thread := _THREAD.match(line)) is not None:
            if head is not None:
                threads.append(Thread(*head, tuple(frames)))
            tid = thread["tid"]
            head = (int(tid, 16) if tid.startswith("0x") else int(tid), thread["name"],
                    "active" in (thread["state"] or ""))
            frames = []
        elif head is not None and (match := FRAME_LINE.match(line)) is not None:
            frame = normalise(match["func"], match["file"])
            if frame is not None:
                frames.append(frame)
    if head is not None:
        threads.append(Thread(*head, tuple(frames)))
    return tuple(threads)


# A stack a log holds: a Python traceback's frame (`File "x.py", line 3, in f`, innermost
# last), a faulthandler dump's (`File "x.py", line 3 in f`, innermost first), or py-spy's
# under its `Thread N` header (innermost first). Ranks' prefixes (`[rank0]: `) may come first.
# A frame whose head was cut when pasted (`habitat/base_trainer.py", line 102, in eval`) is one
# all the same: nothing else holds a file, a quote, a line and a function so.
_LOGGED_FRAME = re.compile(r'(?:(?:^|\s)File "|^)(?P<file>[^"\s]+)", line \d+(?P<comma>,)? in '
                           r"(?P<func>[\w.<>]+)")
# A numbered frame, innermost first from #0: SGLang's dump (`#61 forward_extend from
# /x/model_runner.py:1698`) and gdb's backtrace (`#3  0x7f.. in ncclProxyService () from
# /lib/libnccl.so.2`, `#0  futex_wait (...) at ../futex-internal.c:57`).
_NUMBERED_FRAME = re.compile(r"^\s*#(?P<n>\d+)\s+(?:0x[0-9a-fA-F]+ in )?(?P<func>[^\s(]+)"
                             r"(?:\s*\(.*\))? (?:from|at) (?P<file>\S+?)(?::\d+)?\s*$")
# A C++ frame of the backtrace torch's errors print, innermost first from #0 ("frame #7:
# c10d::ProcessGroupNCCL::broadcastUniqueNCCLID(ncclUniqueId*, bool) + 0xaf (0x7f.. in
# /x/libtorch_cuda.so)"), its library the frame's file.
_C10_FRAME = re.compile(r"\bframe #(?P<n>\d+): (?P<func>.+?) \+ 0x[0-9a-f]+ "
                        r"\(0x[0-9a-f]+ in (?P<file>[^()\s]+)\)")
# The outermost call in a line of source: `values = worker.get_objects(refs)` -> worker.get_objects.
_CALL = re.compile(r"(?<![\w.])(?P<name>[A-Za-z_][\w.]*)\s*\(")
_FIRST_HEADER = re.compile(r"\(most recent call first\)|^Thread (?:0x[0-9A-Fa-f]+|\d+)\b")
_LAST_HEADER = re.compile(r"Traceback \(most recent call last\)")


# The header of the interpreter's main thread: py-spy names it; faulthandler marks the thread
# it was called from (the main one, in a dump on a signal or a timeout).
_MAIN_HEADER = re.compile(r'"MainThread"|^Current thread\b')


class LoggedStack(NamedTuple):
    frames: list[tuple[int, Frame]]  # innermost first, each with the index of its line
    main: bool  # the main thread's, or a traceback's (raised where the job was)


def logged_stacks(lines: list[str]) -> list[LoggedStack]:
    """The stacks printed in `lines`, oldest first: what a log shows of where a process was
    (a traceback after Ctrl-C, a faulthandler or py-spy dump written into it)."""
    # (innermost first, main, frames) of each stack so far
    stacks: list[tuple[bool, bool, list[tuple[int, Frame]]]] = []
    for index, line in enumerate(lines):
        innermost_last = _LAST_HEADER.search(line) is not None
        if innermost_last or _FIRST_HEADER.search(line):
            main = innermost_last or _MAIN_HEADER.search(line) is not None
            stacks.append((not innermost_last, main, []))
            continue
        found = _LOGGED_FRAME.search(line)
        if found is not None:
            func, file, first = found["func"], found["file"], found["comma"] is None
        elif (found := _NUMBERED_FRAME.match(line) or _C10_FRAME.search(line)) is not None:
            func, file, first = found["func"], found["file"], True
            if found["n"] == "0" and stacks and stacks[-1][2]:
                stacks.append((True, False, []))  # frame #0: the next thread's stack
        elif (found := FRAME_LINE.match(line)) is not None and (
                (stacks and stacks[-1][0]) or _headless(found, lines, index)):
            func, file, first = found["func"], found["file"], True
        else:
            continue
        frame = normalise(func, file)
        if frame is None:
            continue
        if not stacks or (not stacks[-1][2] and stacks[-1][0] != first):
            # frames with no header before them: a cut traceback's are the job's own
            stacks.append((first, not first, []))
        stacks[-1][2].append((index, frame))
        if not first and (call := _called(line, found.start(), lines, index)) is not None:
            stacks[-1][2].append((index + 1, call))
    return [LoggedStack(frames if first else frames[::-1], main)
            for first, main, frames in stacks if frames]


def _called(line: str, at: int, lines: list[str], index: int) -> Frame | None:
    """The call a Python traceback's frame was making, from the source line printed under it
    (`    self.checkpointer.save(`): a frame of its own, just inside the one that made it, named
    `checkpointer.save (call: self.checkpointer.save()`. Where the traceback was cut or
    interrupted there, it is all the log says of what ran; elsewhere its arguments say what a
    wait inside was for (`ray.get(pg.ready())`)."""
    if index + 1 >= len(lines):
        return None
    head = line[:at].strip()  # a launcher's rank prefix, printed before the code line too
    code = lines[index + 1]
    if head and code.lstrip().startswith(head):
        code = code.lstrip()[len(head):]
    if not code[:1].isspace() or _LOGGED_FRAME.search(code) is not None:
        return None  # the exception's own line, or the next frame: no source line
    called = _CALL.search(code)
    if called is None:
        return None
    name = called["name"].removeprefix("self.")
    return Frame(name, f"call: {code.strip()[:MAX_FUNCTION_CHARS]}")


def _headless(found: re.Match[str], lines: list[str], index: int) -> bool:
    """py-spy's frames pasted without their thread's header: a Python file's frame with
    another frame after it (one indented `f (x.py:3)` alone is no stack)."""
    return (found["file"].endswith(".py") and index + 1 < len(lines)
            and FRAME_LINE.match(lines[index + 1]) is not None)


def normalise(function: str, file: str) -> Frame | None:
    """A frame without what varies between runs; None for a bare native address."""
    native = bool(_SHARED_OBJECT.search(file))
    if _ADDRESS.fullmatch(function):
        return None
    if native:
        function = _without_brackets(function)
        file = file.rsplit("/", 1)[-1]  # gdb names the library's or source's folder too
    else:
        file = _LIBRARY_ROOT.sub("", file)
        if file.startswith(("/", "...")):  # `.../jax/_src/api.py`: a path elided when pasted
            file = _CHECKOUT_PACKAGE.sub("", file, count=1)
        if file.startswith(("/", "...")):
            file = file.rsplit("/", 1)[-1]  # a script's own folder differs between nodes
    if len(function) > MAX_FUNCTION_CHARS:
        function = function[:MAX_FUNCTION_CHARS] + "..."
    return Frame(function, file, native)


def _without_brackets(function: str) -> str:
    """`ns::f<T, U>(int)::{lambda(x)#1}::_FUN` -> `ns::f::{lambda#1}::_FUN`: C++ names from
    one template differ by their arguments, which say nothing about where a thread waits."""
    out: list[str] = []
    depth = 0
    for char in function:
        if char in "<(":
            depth += 1
        elif char in ">)" and depth:
            depth -= 1
        elif not depth:
            out.append(char)
    return "".join(out).strip() or function


def main_thread(threads: tuple[Thread, ...], pid: int | None = None) -> Thread | None:
    """The interpreter's main thread: named MainThread, else the one whose id is the pid,
    else the first listed."""
    for thread in threads:
        if thread.name == "MainThread":
            return thread
    for thread in threads:
        if pid is not None and thread.tid == pid:
            return thread
    return threads[0] if threads else None
