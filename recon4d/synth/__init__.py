"""Synthetic dynamic scenes with full ground truth and VLM4D-format questions.

Why: the reconstruction and the VQA bridge need videos whose 3D truth is known
exactly, and minimal pairs (one factor changed, everything else fixed) to tell
whether a model reads motion or guesses. ``recon4d synth`` builds them from a
seed: a checkered ground and striped backdrop, one to three patterned objects
(cube, ball, cylinder) with scripted motions, a static/pan/dolly/orbit camera,
all rendered with the project's own rasterizer (``recon4d.render.rasterize``).

Scene folder, ``<out>/<scene_id>/`` (the input frames follow DAVIS, which the
``fit`` stage reads like any video source; see docs/design.md)::

    video.mp4                 the input video (H.264, or MPEG-4 where libx264 is missing)
    JPEGImages/00000.jpg ...  the same frames, DAVIS layout
    Annotations/00000.png ... object ids, palette PNG as in DAVIS (0 background, k object k)
    qa.json                   questions, exactly the VLM4D json format
    synth.json                config + seed + command line to regenerate; pair links
    gt/depth.npz              depth [T,H,W] float16 metres (camera z, the rasterizer's expected depth,
                              0 where empty), alpha [T,H,W] uint8 (x255)
    gt/cameras.json|.npz      K [3,3] and world-to-camera viewmats [T,4,4] (OpenCV, world z up)
    gt/objects.json|.npz      per object: id, name, motion, centre [T,3], yaw [T], quat_wxyz [T,4]
    gt/questions.json         per question: key, kind, subject, the numbers the answer came from,
                              and for minimal pairs the id of the same question in the partner scene
    gt/novel/                 the "global view" camera of docs/design.md: JPEGImages/, Annotations/,
                              depth.npz, cameras.json|.npz

Modules, one job each: ``config`` (CLI dataclass, presets, argument checks),
``scene`` (dataclasses), ``cameras`` (paths, projection), ``motions``
(trajectories), ``layout`` (seeded placement that keeps ground truth visible),
``assets`` (Gaussians), ``render`` (RGB + masks + depth in one rasterize call),
``questions`` (answers from ground truth), ``writer`` (file formats),
``pipeline`` (``generate``).
"""

from recon4d.synth.config import PRESETS, SynthConfig, SynthError, preset
from recon4d.synth.pipeline import generate

__all__ = ["PRESETS", "SynthConfig", "SynthError", "generate", "preset"]
