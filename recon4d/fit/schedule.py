"""Which frames a fit works on: those not held out, and at each step a shuffled deck's next frame
(whole-scene stages) or frames in turn (per-frame stages)."""

from __future__ import annotations

import random


def held_out_frames(frames: int, every: int) -> frozenset[int]:
    """The frames ``holdout_every`` keeps out of the fit (none when ``every`` is 0 or leaves too few)."""
    if every <= 1 or frames < 2 * every:
        return frozenset()
    return frozenset(range(every // 2, frames, every))


def deck_frame(frames: list[int], seed: int, stage: str, step: int) -> int:
    """The frame of a whole-scene step: every frame once per round of T steps, in a fresh shuffled order
    each round, the order a function of (seed, stage, round) so that a resumed run draws the same frames.

    Why not a uniform draw per step: over a thousand steps on 50 frames that gives
    some frames half as many updates as others (binomial spread), and those
    frames end blurrier; a shuffled deck keeps the count equal and the order random.
    """
    order = list(frames)
    T = len(order)
    random.Random(f"{seed}/{stage}/{step // T}").shuffle(order)
    return order[step % T]


def frames_in_turn(frames: list[int], skip: int | None) -> list[int]:
    """The frames a per-frame stage works through, in order: all of ``frames`` but ``skip``."""
    return [t for t in frames if t != skip]


def frame_in_turn(frames: list[int], skip: int | None, per_frame: int, step: int) -> int:
    """The frame a per-frame stage (``cameras``, ``motion``) works on at ``step``: ``per_frame``
    consecutive steps for each of :func:`frames_in_turn`; ``Trainer`` clears the optimiser state
    when a new frame starts (:func:`starts_frame`).

    Why one frame at a time: a training step sees one frame, so with the whole
    ``[T, 6]`` correction in one Adam, each frame's row gets a gradient once
    every T steps and is otherwise carried by stale momentum; in the static and
    joint stages that leaves a frame a dozen real updates (blackswan: 0.4 px
    solved cameras, yet single frames 2-3 dB below their neighbours from pose
    jitter). Here each frame gets ``per_frame`` consecutive updates of its
    own, and clearing the state between frames makes the rows of the others
    stand still (zero gradient, zero moments: zero update).
    """
    return frames_in_turn(frames, skip)[step // per_frame]


def starts_frame(per_frame: int, step: int) -> bool:
    """Whether ``step`` of a per-frame stage is the first on its frame."""
    return step % per_frame == 0


def ends_frame(per_frame: int, step: int) -> bool:
    """Whether ``step`` of a per-frame stage is the last on its frame."""
    return (step + 1) % per_frame == 0
