"""``recon4d view``: a fitted scene in the browser, on viser (the viewer library nerfstudio uses).

Shows the splats (viser's own Gaussian-splat renderer), a time slider, the input
camera frusta (the current one highlighted, with its frame), the scaffold nodes at
the current time and their whole trajectories, and a colour switch RGB / depth /
feature PCA. The panel reports the frame on display, so a user (or a test) can see
that a slider move took effect. Bound to 127.0.0.1 unless told otherwise: the
scene may be private and viser has no authentication.
"""

from __future__ import annotations

import math
import signal
import threading
import time

import numpy as np
import torch
import viser

from recon4d.export.job import dynamic_splats, static_splats
from recon4d.export.ply import Splats
from recon4d.geometry import rotmat_to_quat_np
from recon4d.render.cameras import camera_centre, global_camera
from recon4d.render.fitted import FittedScene
from recon4d.viewer.scene_layers import MODES, PcaColours, colours, covariances, trajectory_segments



class SceneViewer:
    """One viser server showing one fitted scene; ``show(t)`` switches the frame."""

    def __init__(self, fitted: FittedScene, host: str = "127.0.0.1", port: int = 8080):
        self.fitted = fitted
        scene, data = fitted.scene, fitted.data
        self.static = static_splats(scene)
        self.static_cov = covariances(self.static)
        self.pca = PcaColours(torch.cat([self.static.latents, scene.dynamic_latents()]))
        self.lock = threading.Lock()
        # Sizes of frusta, nodes and lines follow the scene's scale (its median prior depth).
        self.extent = float(data.depth[data.depth > 0].median()) if (data.depth > 0).any() else 1.0

        self.server = viser.ViserServer(host=host, port=port, verbose=False)
        up = data.world_up if data.world_up is not None else -data.viewmats[0, 1, :3]
        self.server.scene.set_up_direction(tuple(float(x) for x in up))
        self._start_at_global_view()
        gui = self.server.gui
        self.status = gui.add_markdown("")
        self.slider = gui.add_slider("frame", min=0, max=data.frames - 1, step=1, initial_value=data.frames // 2)
        self.mode = gui.add_dropdown("colour", MODES, initial_value="rgb")
        self.show_static = gui.add_checkbox("static splats", True)
        self.show_nodes = gui.add_checkbox("scaffold", True)
        self.slider.on_update(lambda _: self.show())
        self.mode.on_update(lambda _: self.show())
        self.show_static.on_update(lambda _: self.show())
        self.show_nodes.on_update(lambda _: self.show())
        self._add_cameras()
        self._add_trajectories()
        self.show()

    @property
    def url(self) -> str:
        return f"http://{self.server.get_host()}:{self.server.get_port()}"

    def _start_at_global_view(self) -> None:
        """Open (and "reset view") at docs/design.md's global view, which sees the whole event."""
        view, K = global_camera(self.fitted.scene, self.fitted.data)
        cam = self.server.initial_camera
        cam.position = tuple(camera_centre(view).tolist())
        cam.look_at = tuple((camera_centre(view) + self.extent * view[2, :3]).tolist())
        cam.up = tuple((-view[1, :3]).tolist())
        cam.fov = 2 * math.atan(self.fitted.data.height / (2 * float(K[1, 1])))

    def _add_cameras(self) -> None:
        data = self.fitted.data
        fov = 2 * math.atan(data.height / (2 * float(data.K[1, 1])))
        self.frusta = []
        for t, view in enumerate(data.viewmats):
            self.frusta.append(self.server.scene.add_camera_frustum(
                f"/cameras/{t:05d}", fov=fov, aspect=data.width / data.height, scale=0.05 * self.extent,
                thickness=0.003 * self.extent, color=(120, 120, 120),
                wxyz=rotmat_to_quat_np(view[:3, :3].T.double().numpy()), position=camera_centre(view).numpy()))

    def _add_trajectories(self) -> None:
        scaffold = self.fitted.scene.scaffold
        self.trajectories = None
        if len(self.fitted.scene.dynamic) == 0:
            return
        with torch.no_grad():
            segments = trajectory_segments(scaffold.node_positions())
        self.trajectories = self.server.scene.add_line_segments(
            "/scaffold/trajectories", segments, colors=(255, 170, 0), thickness=0.002 * self.extent)

    def _splats(self, name: str, splats: Splats, cov: np.ndarray, t: int, visible: bool) -> None:
        rgb = colours(splats, self.mode.value, self.fitted.data.viewmats[t], self.pca)
        self.server.scene.add_gaussian_splats(name, centers=splats.means.numpy(), covariances=cov, rgbs=rgb,
                                              opacities=splats.opacities.numpy()[:, None], visible=visible)

    @torch.no_grad()
    def show(self, t: int | None = None) -> None:
        """Draw frame t (default: the slider's) and report it in the panel."""
        if t is not None:
            self.slider.value = t  # triggers on_update -> show()
            return
        t = int(self.slider.value)
        with self.lock:
            scene, data = self.fitted.scene, self.fitted.data
            dyn = dynamic_splats(scene, t)
            with self.server.atomic():
                self._splats("/splats/static", self.static, self.static_cov, t, self.show_static.value)
                if len(dyn):
                    self._splats("/splats/dynamic", dyn, covariances(dyn), t, True)
                    nodes = scene.scaffold.node_positions(t).numpy()
                    self.server.scene.add_point_cloud("/scaffold/nodes", nodes, colors=(255, 60, 0),
                                                      point_size=0.004 * self.extent, visible=self.show_nodes.value)
                self.server.scene.add_camera_frustum(
                    "/cameras/current", fov=self.frusta[t].fov, aspect=data.width / data.height,
                    scale=0.08 * self.extent, thickness=0.005 * self.extent, color=(230, 30, 30),
                    image=(data.images[t].numpy() * 255).astype(np.uint8), format="jpeg",
                    wxyz=self.frusta[t].wxyz, position=self.frusta[t].position)
                if self.trajectories is not None:
                    self.trajectories.visible = self.show_nodes.value
            self.status.content = (f"**frame {t}** of {data.frames} · {self.mode.value} · "
                                   f"{len(self.static)} static + {len(dyn)} dynamic splats")

    def stop(self) -> None:
        self.server.stop()


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def serve(fitted: FittedScene, host: str = "127.0.0.1", port: int = 8080, log=print) -> None:
    """Run the viewer until Ctrl-C (or SIGTERM), then shut the server down cleanly.

    The handlers are installed explicitly because a process started in the background
    inherits an ignored SIGINT, and then Ctrl-C / ``kill -INT`` would do nothing.
    """
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    viewer = SceneViewer(fitted, host, port)
    log(f"viewer: {viewer.url}  (Ctrl-C to stop)")
    try:
        while True:
            time.sleep(0.5)
    finally:
        viewer.stop()
        log("viewer: stopped")
