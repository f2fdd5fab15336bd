"""PyTorch twin of the tile-based rasterization kernel (forward by tensors, backward by autograd).

Same signature and semantics as ``cuda_ext.rasterize.rasterize_to_pixels``: each
Gaussian is binned into the 16x16 tiles its 3.33-sigma box touches, each tile's
list is sorted front to back, and every pixel composites its tile's list with
gsplat's rules (alpha = min(0.999, o*exp(-sigma)), skip alpha < 1/255, stop before
the Gaussian that would bring transmittance to <= 1e-4).

Instead of a per-pixel loop, a tile is evaluated densely: all pixels x all listed
Gaussians, transmittance by cumulative product. Because transmittance only falls,
"stop at T <= 1e-4" is a prefix mask, so the result is the kernel's to rounding.
"""

from __future__ import annotations

import torch
from torch import Tensor

ALPHA_MIN = 1.0 / 255.0
ALPHA_MAX = 0.999
T_MIN = 1e-4


@torch.no_grad()
def intersect_tiles(
    means2d: Tensor, radii: Tensor, depths: Tensor, width: int, height: int, tile_size: int
) -> tuple[Tensor, Tensor]:
    """Bin Gaussians into tiles, depth-sorted within each tile.

    Returns ``tile_offsets`` [C, n_tiles + 1] (int64, into the flat list) and
    ``flat_ids`` [n_isect] (int64 Gaussian index within its camera).
    """
    C, N = depths.shape
    tiles_x = (width + tile_size - 1) // tile_size
    tiles_y = (height + tile_size - 1) // tile_size
    n_tiles = tiles_x * tiles_y
    lo = torch.floor((means2d - radii) / tile_size).long()
    hi = torch.ceil((means2d + radii) / tile_size).long()
    lo[..., 0].clamp_(0, tiles_x), hi[..., 0].clamp_(0, tiles_x)
    lo[..., 1].clamp_(0, tiles_y), hi[..., 1].clamp_(0, tiles_y)
    extent = (hi - lo).clamp(min=0)
    counts = extent[..., 0] * extent[..., 1] * (radii > 0).all(-1)  # [C, N]

    # Visit Gaussians front to back so that a stable sort by tile keeps depth order.
    order = torch.argsort(depths, dim=-1, stable=True)  # [C, N]
    counts_sorted = torch.gather(counts, 1, order).reshape(-1)
    gauss = order.reshape(-1).repeat_interleave(counts_sorted)
    cam = torch.arange(C, device=depths.device).repeat_interleave(N).repeat_interleave(counts_sorted)
    start = torch.cumsum(counts_sorted, 0) - counts_sorted
    local = torch.arange(gauss.numel(), device=depths.device) - start.repeat_interleave(counts_sorted)
    width_g = extent[cam, gauss, 0]
    tx = lo[cam, gauss, 0] + local % width_g.clamp(min=1)
    ty = lo[cam, gauss, 1] + local // width_g.clamp(min=1)
    key = cam * n_tiles + ty * tiles_x + tx
    key, perm = torch.sort(key, stable=True)
    flat_ids = gauss[perm]
    per_tile = torch.bincount(key, minlength=C * n_tiles)
    offsets = torch.zeros(C * n_tiles + 1, dtype=torch.long, device=depths.device)
    offsets[1:] = torch.cumsum(per_tile, 0)
    return offsets, flat_ids


def rasterize_to_pixels(
    means2d: Tensor,
    conics: Tensor,
    colors: Tensor,
    opacities: Tensor,
    radii: Tensor,
    depths: Tensor,
    width: int,
    height: int,
    tile_size: int = 16,
) -> tuple[Tensor, Tensor]:
    """Composite C images. Returns ``render`` [C, H, W, D] and ``alpha`` [C, H, W, 1]."""
    C, N, D = colors.shape
    tiles_x = (width + tile_size - 1) // tile_size
    tiles_y = (height + tile_size - 1) // tile_size
    n_tiles = tiles_x * tiles_y
    offsets, flat_ids = intersect_tiles(means2d, radii, depths, width, height, tile_size)

    # Tiles are evaluated one by one and assembled once at the end (no in-place writes
    # into a shared image, which would make autograd copy the whole image per tile).
    P = tile_size * tile_size
    tile_render = colors.new_zeros(C * n_tiles, P, D)
    tile_alpha = colors.new_zeros(C * n_tiles, P, 1)
    done_tiles, done_render, done_alpha = [], [], []
    offs = offsets.tolist()
    local = torch.arange(tile_size, dtype=means2d.dtype, device=means2d.device) + 0.5
    for tile in range(C * n_tiles):
        lo, hi = offs[tile], offs[tile + 1]
        if lo == hi:
            continue
        c, t = divmod(tile, n_tiles)
        ty, tx = divmod(t, tiles_x)
        ids = flat_ids[lo:hi]
        px = (tx * tile_size + local)[None, :].expand(tile_size, -1).reshape(-1, 1)
        py = (ty * tile_size + local)[:, None].expand(-1, tile_size).reshape(-1, 1)
        mean = means2d[c, ids]
        con = conics[c, ids]
        dx, dy = mean[:, 0][None] - px, mean[:, 1][None] - py  # [P, n]
        sigma = 0.5 * (con[:, 0] * dx * dx + con[:, 2] * dy * dy) + con[:, 1] * dx * dy
        alpha = torch.clamp(opacities[c, ids] * torch.exp(-sigma), max=ALPHA_MAX)
        alpha = torch.where((sigma >= 0) & (alpha >= ALPHA_MIN), alpha, torch.zeros_like(alpha))
        trans_after = torch.cumprod(1.0 - alpha, dim=1)
        keep = trans_after > T_MIN  # a prefix of the list, per pixel
        trans_before = torch.cat([torch.ones_like(alpha[:, :1]), trans_after[:, :-1]], dim=1)
        weights = torch.where(keep, alpha * trans_before, torch.zeros_like(alpha))
        trans_final = torch.where(keep, 1.0 - alpha, torch.ones_like(alpha)).prod(dim=1, keepdim=True)
        done_tiles.append(tile)
        done_render.append(weights @ colors[c, ids])
        done_alpha.append(1.0 - trans_final)
    if done_tiles:
        index = torch.tensor(done_tiles, device=colors.device)
        tile_render = tile_render.index_put((index,), torch.stack(done_render))
        tile_alpha = tile_alpha.index_put((index,), torch.stack(done_alpha))

    def to_image(tiles: Tensor) -> Tensor:
        image = tiles.reshape(C, tiles_y, tiles_x, tile_size, tile_size, -1).permute(0, 1, 3, 2, 4, 5)
        return image.reshape(C, tiles_y * tile_size, tiles_x * tile_size, -1)[:, :height, :width].contiguous()

    return to_image(tile_render), to_image(tile_alpha)
