"""Gaussian assets: a textured ground, a striped backdrop and patterned objects.

Everything is built from Gaussians so the project's own rasterizer renders the
scene and its depth, and masks come out of the same call as the pixels. The
textures are there for the questions, not for looks: the checkered ground and
striped backdrop give camera motion parallax, and each object carries sector
stripes plus a white "nose" on its front (local +x) so that spinning and
heading are visible in the video, not only in the ground truth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from recon4d.synth.scene import SHAPES

GROUND_RADIUS = 10.0  # metres; the ground disc and the backdrop share this radius
GROUND_BEHIND = -7.5  # world y below which no ground is needed (behind every camera)
BACKDROP_HEIGHT = 5.0
BACKGROUND_SPACING = 0.4  # metres between ground/backdrop Gaussians at detail 1
OBJECT_SPACING = 0.08  # metres between object-surface Gaussians at detail 1
SKY = (0.62, 0.76, 0.93)  # rasterizer background colour


@dataclass
class Gaussians:
    """A set of Gaussians in some frame, with an RGB colour each."""

    means: np.ndarray  # [N, 3]
    quats: np.ndarray  # [N, 4] (w, x, y, z)
    scales: np.ndarray  # [N, 3]
    opacities: np.ndarray  # [N]
    colours: np.ndarray  # [N, 3] in [0, 1]

    def __len__(self) -> int:
        return len(self.means)

    def subset(self, keep: np.ndarray) -> Gaussians:
        return Gaussians(*(getattr(self, f)[keep] for f in Gaussians.__dataclass_fields__))

    @staticmethod
    def cat(parts: list[Gaussians]) -> Gaussians:
        return Gaussians(*(np.concatenate([getattr(p, f) for p in parts]) for f in Gaussians.__dataclass_fields__))


def _flat(points: np.ndarray, normals: np.ndarray, spacing: float, colours: np.ndarray) -> Gaussians:
    """Disc-shaped Gaussians lying in the plane perpendicular to each normal."""
    # rotation taking local z to the normal: axis z x n, angle acos(n_z)
    axis = np.cross(np.array([0.0, 0.0, 1.0]), normals)
    sin = np.linalg.norm(axis, axis=-1, keepdims=True)
    angle = np.arctan2(sin[:, 0], normals[:, 2])
    axis = np.where(sin > 1e-9, axis / np.maximum(sin, 1e-9), np.array([1.0, 0.0, 0.0]))
    quats = np.concatenate([np.cos(angle / 2)[:, None], np.sin(angle / 2)[:, None] * axis], axis=-1)
    n = len(points)
    scales = np.tile([0.6 * spacing, 0.6 * spacing, 0.02 * spacing], (n, 1))
    return Gaussians(points, quats, scales, np.ones(n), colours)


def background(detail: float) -> list[list[Gaussians]]:
    """The static Gaussians as surfaces to draw back to front (backdrop, then ground), each split by tone.

    Why split: the rasterizer orders Gaussians by the depth of their centres, and for two discs side
    by side on one surface that order flips when the view direction crosses the normal of the line
    joining them; for the ground's x-neighbours that is whenever the camera's yaw crosses zero,
    mid-clip on a pan or an orbit. Where the two discs differ in colour, the edge between them jumps
    (~2 px at 128x96) with no camera motion to explain it. Each tone is drawn on its own, so inside
    it the order does not show (the backdrop's vertical shading changes by ~1% from one row to the
    next, too little for a flip to matter), and the renderer mixes a surface's tones by their
    coverage, which no view changes, so every edge sits at the same place on the surface in every
    view. The ground goes over the backdrop, as the single depth-sorted pass drew the far ground
    over the backdrop's base.
    """
    sp = BACKGROUND_SPACING / detail
    return [_backdrop(sp), _ground(sp)]


def _ground(sp: float) -> list[Gaussians]:
    """Checkered ground disc (1 m cells): the light cells and the dark ones."""
    grid = np.arange(-GROUND_RADIUS, GROUND_RADIUS + 1e-9, sp)
    x, y = (a.ravel() for a in np.meshgrid(grid, grid, indexing="xy"))
    keep = (np.hypot(x, y) < GROUND_RADIUS) & (y > GROUND_BEHIND)
    x, y = x[keep], y[keep]
    light = (np.floor(x) + np.floor(y)) % 2 > 0
    ground_rgb = np.where(light[:, None], [0.58, 0.60, 0.55], [0.42, 0.45, 0.40])
    ground = _flat(np.stack([x, y, np.zeros_like(x)], -1), np.tile([0.0, 0.0, 1.0], (len(x), 1)), sp, ground_rgb)
    return [ground.subset(light), ground.subset(~light)]


def _backdrop(sp: float) -> list[Gaussians]:
    """Striped half-cylinder on the far side, shaded darker towards the ground: the light stripes and the dark ones."""
    az = np.arange(0.0, math.pi + 1e-9, sp / GROUND_RADIUS)
    zs = np.arange(sp / 2, BACKDROP_HEIGHT, sp)
    a, z = (v.ravel() for v in np.meshgrid(az, zs, indexing="xy"))
    inward = -np.stack([np.cos(a), np.sin(a), np.zeros_like(a)], -1)
    pts = -GROUND_RADIUS * inward + np.stack([np.zeros_like(z), np.zeros_like(z), z], -1)
    light = np.floor(a * GROUND_RADIUS / 1.2) % 2 > 0
    tone = np.where(light[:, None], [0.80, 0.70, 0.55], [0.65, 0.55, 0.45])
    backdrop = _flat(pts, inward, sp, tone * (0.75 + 0.25 * (z / BACKDROP_HEIGHT))[:, None])
    return [backdrop.subset(light), backdrop.subset(~light)]


def _surface(shape: str, spacing: float) -> np.ndarray:
    """Points ``[N, 3]`` on the surface of ``shape``, centred at the origin."""
    dims = SHAPES[shape]
    if shape == "ball":
        r = dims[0]
        n = max(32, math.ceil(4 * math.pi * r * r / spacing**2))
        k = np.arange(n) + 0.5
        z = 1 - 2 * k / n
        phi = math.pi * (3 - math.sqrt(5)) * k  # golden-angle spiral: even coverage
        rho = np.sqrt(1 - z * z)
        return r * np.stack([rho * np.cos(phi), rho * np.sin(phi), z], -1)
    if shape == "cube":
        h = dims[0] / 2
        m = max(2, math.ceil(dims[0] / spacing))
        u = np.linspace(-h, h, m + 1)
        a, b = (v.ravel() for v in np.meshgrid(u, u))
        faces = []
        for axis in range(3):
            for side in (-h, h):
                p = np.zeros((len(a), 3))
                p[:, axis] = side
                p[:, (axis + 1) % 3], p[:, (axis + 2) % 3] = a, b
                faces.append(p)
        return np.unique(np.round(np.concatenate(faces), 9), axis=0)
    r, height = dims
    around = max(8, math.ceil(2 * math.pi * r / spacing))
    phi = np.linspace(0, 2 * math.pi, around, endpoint=False)
    zs = np.linspace(-height / 2, height / 2, max(2, math.ceil(height / spacing)) + 1)
    p, z = (v.ravel() for v in np.meshgrid(phi, zs))
    side = np.stack([r * np.cos(p), r * np.sin(p), z], -1)
    caps = []
    for ring in np.arange(spacing / 2, r, spacing):
        m = max(4, math.ceil(2 * math.pi * ring / spacing))
        q = np.linspace(0, 2 * math.pi, m, endpoint=False)
        for zc in (-height / 2, height / 2):
            caps.append(np.stack([ring * np.cos(q), ring * np.sin(q), np.full(m, zc)], -1))
    return np.concatenate([side] + caps)


def object_gaussians(shape: str, rgb: tuple[float, float, float], detail: float) -> Gaussians:
    """Isotropic Gaussians on the surface of ``shape`` in its local frame (front = +x).

    Six alternating light/dark sectors around the vertical axis make a spin visible;
    a white patch on the front breaks their symmetry, so the heading is visible too.
    """
    sp = OBJECT_SPACING / detail
    pts = _surface(shape, sp)
    azimuth = np.arctan2(pts[:, 1], pts[:, 0])
    shade = np.where(np.sin(3 * azimuth) >= 0, 1.0, 0.6)
    colours = np.asarray(rgb)[None] * shade[:, None]
    extent = np.abs(pts[:, 0]).max()
    nose = (pts[:, 0] > 0.6 * extent) & (np.abs(azimuth) < math.radians(30))
    colours[nose] = 0.3 * colours[nose] + 0.7
    n = len(pts)
    quats = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    return Gaussians(pts, quats, np.full((n, 3), 0.6 * sp), np.ones(n), colours)
