"""2D priors and the camera, computed once per video and cached in ``<scene>/priors/``.

One module per provider family, each behind a small interface (``compute`` or
``estimate``): ``flow`` (DIS), ``tracks`` (flow-chained, anchored), ``camera``
(FoV search + bundle adjustment) with ``camera_init`` (rotation/translation model
choice, homography and essential-matrix starts, triangulation), ``epipolar``
(where a static point can move between two cameras), ``depth`` (Depth Anything
V2, user files, synth ground truth, sparse fallback; per-frame alignment),
``masks`` (static-motion residual after the camera fit, lifetime track labels,
temporal vote), ``cache``
(hash keys), ``report`` (ground-truth comparison). Teacher features are
cached by ``recon4d.scene.teachers`` in the same folder. The stage that runs them in
order is :func:`recon4d.priors.pipeline.run_preprocess`.
"""
