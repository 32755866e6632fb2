"""What came before a stop line: the place a timeout, abort or watchdog belongs to.

A collective timeout, a heartbeat monitor's abort or a barrier timeout names no place, yet
the lines just before it usually do: a validation bar, a save, step N, a tokenisation bar.
`place_before` reads those lines, newest first, and returns the newest that names a phase
(a rule's START), or a progress bar or counter (with the newest phase line behind it, when
there is one in the window). With no stop line, `place_at_silence` reads the last lines the
same way for bars, counters, metrics, and lines announcing an action begun or saying one
finished; `stack_place` for a stack printed there. Pure: the engine hands it the lines it
kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import regex

from hangwatch.core.model import PhaseRule
from hangwatch.core.stackrules import CALLER_NAMED_PHASES, StackRule, rule_for
from hangwatch.core.stacktext import logged_stacks
from hangwatch.core.timestamps import parse_stamp

BEFORE_LINES = 60  # how far back a stop line looks for its place
# A collective timeout fires its timeout (10 to 60 minutes) after the last step: a window in
# seconds, where both lines carry a time, only keeps out what belongs to an earlier run.
BEFORE_S = 2 * 3600.0
TEXT_CHARS = 160

# A line that stops the job, or says it is about to: its place is in the lines before it.
STOP = regex.compile(
    r"(?i)\btime ?out\b|\btimed out\b|\w*Timeout(?:Error|Exception)?\b|\bdeadline exceeded\b"
    r"|\bwatchdog\b|\bheartbeat\b|\babort(?:ed|ing|s)?\b|\bSIGABRT\b|\bstall(?:ed|ing)?\b"
    r"|\bstuck\b"
    # the job stopped from outside, most often by a user who found it hung: a launcher passing
    # Ctrl-C or a kill on to its workers (a Ctrl-C traceback's own stack says more: stacks)
    r"|\bclosing signal\b|\bSIG(?:INT|TERM)\b")
# The job stopped from outside (a Ctrl-C, a scheduler's or launcher's kill): what such a line
# says (`Received Signals.SIGINT death signal, shutting down workers`) is the reaction to a hang,
# not its place, which is in the lines before it. It opens no generic phase.
# torchelastic's agent says `Received 2 death signal` for any of them; `^C` is the terminal's
# echo of a Ctrl-C at the head of the next line.
INTERRUPTED = regex.compile(r"\bSIG(?:INT|TERM|HUP|KILL|QUIT)\b|\bKeyboardInterrupt\b"
                            r"|(?i:\bctrl[- ]?c\b|\bdeath signal\b)|^\^C")
# One of these is in every INTERRUPTED match on a line of ASCII, lowered: `sig` for the
# signal names and `death signal`.
_INTERRUPTED_WORDS = ("sig", "ctrl", "keyboardinterrupt", "^c")


def interrupted(text: str) -> bool:
    """Does the line say the job was stopped from outside (INTERRUPTED)? On a line of ASCII
    the search runs only where one of its words is: 0.3 µs against 1.5 µs, on every line
    that starts a phase. (Outside ASCII, case folding matches other letters: U+017F is `s`.)"""
    if text.isascii():
        lower = text.lower()
        for word in _INTERRUPTED_WORDS:  # a loop: any() over a generator costs twice this
            if word in lower:
                break
        else:
            return False
    return INTERRUPTED.search(text) is not None


# A progress bar or a counter: where a loop was, even when no rule names the loop.
COUNTER = regex.compile(
    r"\d{1,3}%\s*\||\|\s*\d+/\d+\s*\[|\b\d+\s*/\s*\d+\b"
    r"|(?i:\b(?:epoch|step|iter(?:ation)?|batch)\s*[:=#]?\s*\[?\d+)")


# At the silence no stop line vouches that a loop was cut short, so only what is surely a
# loop's progress counts: a bar (`45%|`, `| 9/20 [`, or tqdm's meter alone as a notebook
# shows it, `9/20 [00:03<00:04, 2.83it/s]`) or a named counter (`step 12`), not any `N/M`
# (a date, an NCCL channel).
BAR = regex.compile(r"\d{1,3}%\s*\||\|\s*\d+/\d+\s*\["
                    r"|\b\d+/\d+ \[[\d:]+<[\d:?]+, *[\d.?]+ ?(?:[a-zA-Z]+/s|s/[a-zA-Z]+)\]"
                    # Keras's `12/50 [=====>....]`, Chainer's `[####....] 54.35%`, click's
                    # `[###-]  5028/5029`: a bracket of fill, then or after it a count.
                    r"|\b\d+/\d+ \[[=>.]{8,}\]"
                    r"|\[[#=>.\-\u2588 ]{8,}\]\s*(?:\d{1,3}(?:\.\d+)?%|\d+/\d+)"
                    # rich's and Ultralytics' line of box glyphs: `95% ━━━━━━━━━━─ 41/43`
                    r"|\d{1,3}%\s*[\u2501\u2500\u2578\u257a]{5,}\s*\d+/\d+")
# A bar's count, read at or just after its start (`100%|####| 4/4 [`): the bar's own, not a
# description's (`Epoch 1/3: 45%|`).
BAR_COUNT = regex.compile(r"\b(\d+)\s*/\s*(\d+)\b")
BAR_COUNT_CHARS = 80
FULL = regex.compile(r"\b100(?:\.0+)?%")
NAMED_COUNTER = regex.compile(r"(?i)\b(?:epoch|step|iter(?:ation)?|batch)\s*[:=#]?\s*\[?\d+")
# A launcher's or provisioning script's own progress (`Step 12/12: Running health checks`) is
# no loop of the job's: a step N/M, a colon, a verb in -ing and more words or nothing (the
# generic layer's step counter leaves the same lines out).
LAUNCHER_STEP = regex.compile(r"(?i)\bstep\s*\d+\s*(?:/|of)\s*\d+\s*:\s*[a-z]*ing"
                              r"(?:\s+[a-z]|\s*\.|\s*$)")
# A bar with no words takes its loop from a line this close before it that names one.
ANNOUNCED_WITHIN = 3
# A line of training metrics (`{'loss': 0.0138, 'learning_rate': ...}`, `train_loss=2.31`): the
# job was in its training loop, or its evaluation when the loss is an eval/validation one.
METRICS = regex.compile(r"(?i)(?<![\w/])(?:(?P<eval>eval|val|valid|validation|test)[_/ ]"
                        r"|train(?:ing)?[_/ ])?"
                        r"loss['\"]?\s*[:=]\s*(?:-?\d|nan\b|inf\b)")  # a diverged loss too

# What a bar's or counter's own words say it counts, by the generic layer's phase ids: a
# stop line after `Tokenizing: 45%|` or `Validation 3/50` belongs to that loop even where no
# rule names the framework's words for it. The first that matches wins.
BAR_WORDS: tuple[tuple[str, regex.Pattern[str]], ...] = tuple(
    (phase, regex.compile(words, regex.IGNORECASE)) for phase, words in (
        ("evaluation", r"\b(?:eval\w*|valid\w*|val|test(?:ing)?|predict\w*|infer\w*"
                       r"|generat\w*|sampling|rollout\w*)\b"),
        ("checkpoint_save", r"\b(?:sav(?:e|ing)|writ(?:e|ing)|upload\w*|export\w*)\b"),
        # a load, or a count of a model's tensors by name (`layers.47.ffn_norm.weight: 75%|`)
        ("model_load", r"\b(?:(?:down)?load\w*|restor\w*)\b[^\n|]*\b(?:model|weights?|shards?"
                       r"|checkpoint\w*|state)\b|\.(?:weight|bias)\b"),
        ("data_load", r"\b(?:token\w*|preprocess\w*|map|filter\w*|download\w*|data\w*"
                      r"|shuffl\w*|packing|pack\w* sequences|process\w* (?:dataset|data|split)"
                      r"|read(?:s|ing)?|load\w*|index\w*)\b"),
        ("train_loop", r"\b(?:train\w*|epoch\w*|step\w*|iter\w*|batch\w*|fit\w*)\b"),
    ))

# A line announcing an action begun ("[INFO] Starting train", "building datasets ...",
# "**Initializing horovod**"): the verbs frameworks open a step with, capitalised as a message
# starts, or a trailing ellipsis. With no bar, counter or metrics after it, the newest such
# line within ANNOUNCE_LINES of the end names where a job that went quiet was, by its words,
# unless a later line says something finished (then the job was past it).
ANNOUNCE = regex.compile(
    r"(?P<verb>\b(?:Start(?:ing)?|Begin(?:ning)?|Initiali[sz]ing|Init|Loading|Building|Creating"
    r"|Preparing|Compiling|Waiting|Monitoring|Connecting|Launching|Setting up|Indexing"
    r"|Downloading|Tokeni[sz]ing|Running|Computing|Evaluating|Saving|Generating"
    r"|(?:Pre)?[Pp]rocessing|Fetching|Syncing|Allocating|Capturing|Profiling|Warming up)\b)"
    # or at the end: an ellipsis, or `start`/`begins` after what starts (`Timer actor_train
    # start`, `train_step begins...`)
    r"|(?:\b(?:start(?:s|ed|ing)?|begins?)\b[\s*]*(?:\.\.\.|\u2026)?|\.\.\.|\u2026)[\s*.]*$")
# A line saying an action finished (`CheckpointManager::save_all call done`, `Model saved`):
# with nothing after it, the job hangs in what comes next (core/order.py), as after a phase
# a rule saw complete. Its words before the verb say which action.
FINISHED = regex.compile(r"(?i)\b(?:done|finished|completed?|succeeded|saved|took \d)\b")
AT_END = regex.compile(r"\b(\d+)\s*/\s*\1\b")
FINISHED_WORDS: tuple[tuple[str, regex.Pattern[str]], ...] = (
    ("checkpoint_save", regex.compile(r"(?i)\bsav(?:e|ed|ing)\w*|\bcheckpoint\w*")),
    *((phase, words) for phase, words in BAR_WORDS if phase != "checkpoint_save"))
ANNOUNCE_LINES = 5
# A download, said done with no words of its own (`Downloading GDB-9 data...`, `Done.`): what
# it fetched is unpacked or loaded next, in the same place.
DOWNLOAD = regex.compile(r"(?i)\b(?:download|fetch)(?:ing|ed)?\b")
# An announcement's words name more kinds of place than a bar's: a rendezvous, a build, a
# wait; a dataset being built is data even when its name says "validation"; and what is
# waited for says more than the waiting (`Waiting in store based barrier to initialize
# process group` is a distributed init, `Waiting for 1 core engine proc` an engine's load);
# a model's parameters are its load (`fitting params to device memory ...`).
ANNOUNCED_WORDS: tuple[tuple[str, regex.Pattern[str]], ...] = tuple(
    (phase, regex.compile(words, regex.IGNORECASE)) for phase, words in (
        ("distributed_init", r"\b(?:distributed|process[ _]group|horovod|nccl|gloo|mpi"
                             r"|rendezvous|communicators?|world[ _]size|ddp)\b"),
        ("build", r"\b(?:compil\w*|jit|extensions?|kernels?|cuda ?graphs?)\b"),
        ("data_load", r"\b(?:datasets?|data ?loaders?|splits?|corpus|index\w*)\b"),
        ("model_load", r"\b(?:models?|engines?|weights|param(?:eter)?s|checkpoints?|ckpt"
                       r"|pretrained)\b|\.(?:pt|pth|bin|safetensors|ckpt|h5)\b"),
        # workers started, connected to or set up (`Connecting to workers...`, `Running
        # rollout_worker lazy initialization...`): the job waits for them to come up. Not
        # "actor": in RL it is the policy (`Timer actor_train start` is its training).
        ("resource_wait", r"\b(?:workers?|replicas|executors?)\b"),
        ("resource_wait", r"\b(?:waiting|wait(?:s|ed)? for|monitoring|not (?:up|ready) yet"
                          r"|retrying|pending|queued)\b"),
    )) + BAR_WORDS
# An announcement's words end where its details start (`Initializing an LLM engine with
# config: model=..., download_dir=...`): the values after it name other things.
ANNOUNCED_CHARS = 80
DETAILS = regex.compile(r"[:=({\[]")


@dataclass(frozen=True)
class Place:
    """Where a stop line belongs: `phase` (a rule) and/or a progress bar or counter, at
    `back` lines before it."""

    phase: PhaseRule | None
    text: str
    back: int
    counter: str = ""  # the bar or counter line, when that came after the phase line
    by_start: bool = False  # `phase` is a rule's START the engine has read already
    label: str = ""  # a stack's place in words ("collective"), for one no phase names
    by_default: bool = False  # a bar with no words: taken as the training loop
    finished: bool = False  # `phase` is an action the line says finished: the job is past it

    def describe(self, before: str = "before") -> str:
        where = (f"{self.phase.title} ({self.phase.id})" if self.phase
                 else self.label or "a progress line")
        if self.by_default:
            where += ", a bar with no words taken as a training job's main loop"
        if self.finished:
            where += " finished"
        shown = self.counter or self.text
        return f"{where}, {self.back} line(s) {before}: {shown[:TEXT_CHARS]}"


def is_stop(text: str) -> bool:
    return STOP.search(text) is not None


def bar_at_end(text: str) -> bool:
    """A progress bar that reached its end (`100%|`, `| 4/4 [`, `50/50 [=====`): the loop
    it counted is done, and a job quiet after it is in what comes next. Its count, where it
    shows one, decides (tqdm rounds 999/1000 up to 100%)."""
    bar = BAR.search(text)
    if bar is None:
        return False
    count = BAR_COUNT.search(text, bar.start(), bar.end() + BAR_COUNT_CHARS)
    if count is not None:
        return count[1] == count[2] and count[1] != "0"
    return FULL.search(text, bar.start()) is not None


def place_before(lines: Sequence[str], stop: str,
                 starts: Callable[[str], Sequence[PhaseRule]],
                 generic: Callable[[str], PhaseRule | None] = lambda _id: None) -> Place | None:
    """The newest place in `lines` (oldest first, the stop line not among them) within
    BEFORE_LINES and BEFORE_S of `stop`. `starts` gives the phase rules a line STARTs;
    `generic` the generic layer's phase by its id, for what a bar's own words name."""
    stop_stamp = parse_stamp(stop)
    counter: tuple[str, int] | None = None
    said = 0  # lines read that are no stop line
    for back, text in enumerate(reversed(lines[-BEFORE_LINES:]), start=1):
        if _too_old(text, stop_stamp):
            break
        if is_stop(text):
            continue  # the same spew from other ranks, or its traceback
        said += 1
        rules = starts(text)
        if rules:
            found = counter or (text, back)
            return Place(rules[0], text.strip(), found[1],
                         counter[0].strip() if counter else "", by_start=True)
        if counter is None and said <= ANNOUNCE_LINES:
            announced = _announced(text, generic)  # `Starting trainer...`, then Ctrl-C
            if announced is not None:
                return Place(announced, text.strip(), back)
        if counter is None and COUNTER.search(text) and not LAUNCHER_STEP.search(text):
            counter = (text, back)
    if counter is not None:
        return Place(_counted(counter[0], generic), counter[0].strip(), counter[1])
    return None


def place_at_silence(lines: Sequence[str], starts: Callable[[str], Sequence[PhaseRule]],
                     generic: Callable[[str], PhaseRule | None],
                     quiet: Callable[[str], bool] = lambda _text: False) -> Place | None:
    """Where the last lines (oldest first) show the job went quiet: the newest bar or named
    counter within BEFORE_LINES, named by its own words (the text before a bar's percent),
    else by the words of a line just before it that announces its loop (`Infer at
    iteration 0`), else by a line of training metrics before it; or that metrics line
    alone. A bar nothing names is a training job's main loop, said as such. Newer than any
    of those, a line announcing an action begun or saying one finished names it by its
    words (`_recent`). A phase START found first is returned with `by_start` (the engine
    read it already). `quiet` lines (a pack's noise: health probes, idle engine stats) and
    lines saying the job was stopped from outside (INTERRUPTED) are passed over and do not
    count toward ANNOUNCE_LINES."""
    found: tuple[str, int, PhaseRule | None] | None = None
    finished = False  # a line newer than the one being read says something finished
    bare_done = -1  # the count of the line saying so, when its words named nothing
    said = 0  # lines read that are not quiet
    for back, text in enumerate(reversed(lines[-BEFORE_LINES:]), start=1):
        if quiet(text) or interrupted(text):
            continue
        said += 1
        rules = starts(text)
        if rules:
            return Place(rules[0], text.strip(), back, by_start=True)
        if found is None and not finished and said <= ANNOUNCE_LINES:
            recent = _recent(text, back, generic)
            if recent is not None:
                return recent
            finished = FINISHED.search(text) is not None
            if finished:
                bare_done = said
        elif said == bare_done + 1 and DOWNLOAD.search(text):
            # `Downloading GDB-9 data...`, `Done.`: what was fetched is then unpacked or
            # loaded, in the same place (a download is a load's first part)
            announced = _announced(text, generic)
            if announced is not None:
                return Place(announced, text.strip(), back)
        metrics = METRICS.search(text)
        if metrics is not None:
            if found is None:
                phase = generic("evaluation" if metrics["eval"] else "train_loop")
                return Place(phase, text.strip(), back)
            if found[2] is None:
                # A bar of no words after metrics counts the training loop's batches, also
                # after an evaluation's: its metrics line is its report, printed as it ends.
                return Place(generic("train_loop"), found[0].strip(), found[1])
            break
        bar = BAR.search(text)
        if found is None:
            found = _progress(text, back, bar, generic)
        elif found[2] is None and bar is None and back - found[1] <= ANNOUNCED_WITHIN:
            # `Connecting to workers...` then a bar of no words: the bar counts the workers
            announced = _announced(text, generic) or _counted(text, generic)
            if announced is not None:
                return Place(announced, found[0].strip(), found[1])
    if found is None:
        return None
    done = bar_at_end(found[0])  # the loop it counted is done: the job is past it
    if found[2] is None and BAR.search(found[0]):
        return Place(generic("train_loop"), found[0].strip(), found[1], by_default=True,
                     finished=done)
    return Place(found[2], found[0].strip(), found[1], finished=done)


def _recent(text: str, back: int,
            generic: Callable[[str], PhaseRule | None]) -> Place | None:
    """A line near the end that says an action finished (the job is past it) or began."""
    past = _finished(text, generic)
    if past is not None:
        return Place(past, text.strip(), back, finished=True)
    announced = _announced(text, generic)
    return Place(announced, text.strip(), back) if announced is not None else None


def _progress(text: str, back: int, bar: regex.Match[str] | None,
              generic: Callable[[str], PhaseRule | None]
              ) -> tuple[str, int, PhaseRule | None] | None:
    """A bar or named counter, with the loop its own words name (None: they name none)."""
    if bar is not None:
        return text, back, _counted(text[:bar.start()], generic)
    counter = NAMED_COUNTER.search(text)
    if counter is None or LAUNCHER_STEP.search(text):
        return None
    # Its own words run up to the first detail after its number (`Iteration 0, Testing net
    # (#0)`); the metrics past that (`Speed: 24 samples/sec`, `fcn_valid=0.27`) say nothing
    # of the loop.
    details = DETAILS.search(text, counter.end())
    return text, back, _counted(text[:details.start()] if details else text, generic)


def stack_place(lines: Sequence[str], rules: Sequence[StackRule],
                generic: Callable[[str], PhaseRule | None]) -> Place | None:
    """The place of the newest stack printed in the last lines (a traceback after Ctrl-C, a
    faulthandler or py-spy dump): its innermost frame a `stacks:` rule names, as the live
    stacks are read (core/stackrules.py). The rule's phase is the generic layer's, when it
    is one; else its label says where (`collective`). A wait on peers or on remote tasks is
    no place of its own: the frame that called it, where a framework's rule names one, says
    which (a broadcast inside DeepSpeed's engine init is that init; `ray.get` inside a weight
    sync is the training loop)."""
    window = list(lines[-BEFORE_LINES:])
    stacks = logged_stacks(window)
    # A dump of every thread lists helpers (a data loader's pin-memory thread, a watchdog)
    # beside the main thread, in no set order: the main thread's stack is where the job is.
    main = [stack for stack in stacks if stack.main]
    for stack in reversed(main or stacks):
        # lazily: the frames beyond the innermost known one are read only for a peer wait
        known = ((index, frame, found) for index, frame in stack.frames
                 if (found := rule_for(frame.text, rules)) is not None)
        first = next(known, None)
        if first is None:
            continue
        index, frame, inner = first
        back = len(window) - index
        if inner.phase in CALLER_NAMED_PHASES:
            for _, _, outer in known:
                phase = generic(outer.phase) if outer.phase and not outer.guess else None
                if phase is not None:
                    return Place(phase, f"in {frame.text}", back,
                                 label=f"{inner.label} in {outer.label}")
        phase = generic(inner.phase) if inner.phase else None
        return Place(phase, f"in {frame.text}", back, label=inner.label)
    return None


def _announced(text: str, generic: Callable[[str], PhaseRule | None]) -> PhaseRule | None:
    """The place a line announcing an action names by its words; None for another line."""
    announce = ANNOUNCE.search(text)
    if announce is None or METRICS.search(text) or BAR.search(text):
        return None
    if announce["verb"]:  # from the verb on
        said = text[announce.start():announce.start() + ANNOUNCED_CHARS]
        details = DETAILS.search(said)
        said = said[:details.start()] if details else said
    else:  # at the end: what comes before it
        said = text[max(0, announce.start() - ANNOUNCED_CHARS):announce.start()]
    return _named(said, ANNOUNCED_WORDS, generic)


def _finished(text: str, generic: Callable[[str], PhaseRule | None]) -> PhaseRule | None:
    """The action a line says finished, by the words just before its verb; None for
    another line."""
    verb = FINISHED.search(text)
    if verb is None or METRICS.search(text) or BAR.search(text) or AT_END.search(text):
        return None  # a loop's last count (`Inference done 4313/4313`) is not its phase's end
    part = BAR_COUNT.search(text)
    if part is not None and int(part[1]) < int(part[2]):
        return None  # one pass of a loop that goes on (`... finished on step 5 [1/2]`)
    said = text[max(0, verb.start() - ANNOUNCED_CHARS):verb.start()]
    return _named(said, FINISHED_WORDS, generic)


def _counted(text: str, generic: Callable[[str], PhaseRule | None]) -> PhaseRule | None:
    """The loop a bar or counter counts, by its own words."""
    return _named(text, BAR_WORDS, generic)


def _named(said: str, table: Sequence[tuple[str, regex.Pattern[str]]],
           generic: Callable[[str], PhaseRule | None]) -> PhaseRule | None:
    """The first place of `table` whose words `said` holds; an identifier's parts are words
    of their own (`actor_train`, `save_all`)."""
    said = said.replace("_", " ")
    for phase_id, words in table:
        if words.search(said):
            return generic(phase_id)
    return None


def _too_old(text: str, stop_stamp: float | None) -> bool:
    if stop_stamp is None:
        return False
    stamp = parse_stamp(text)
    return stamp is not None and stop_stamp - stamp > BEFORE_S
