"""Measure fits and the geometric answerer on fitted `recon4d synth` minimal pairs.

For every (seed, factor) it generates the pair (seen by a `--camera` path), fits both scenes with
exact priors (`--priors gt`) or from the video alone (`--priors auto`: the camera, depth, tracks and
motion masks a user's video gets), with `--preset test` (a finished fit under <root>/fit is reused, a
checkpoint resumed), scores
each fit against its ground truth (`recon4d eval`: PSNR, trajectory error, motion direction), answers
each scene's qa.json with `recon4d answer`, and scores against the answers in
qa.json. The evaluator (not the answerer) reads gt/questions.json for the question
kinds and the links between the two scenes of a pair. Prints accuracy per question
kind, question-pair consistency (a linked question right in both scenes), scene-pair
consistency (every question of both scenes right) and the runtimes.

    .venv/bin/python scripts/grounding_eval.py --root /tmp/ge --seeds 11
    .venv/bin/python scripts/grounding_eval.py --root /tmp/ge-pan --seeds 11 --priors auto --camera pan --input video
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

from recon4d.commands import answer as answer_command
from recon4d.commands import fit as fit_command
from recon4d.commands import synth as synth_command
from recon4d.eval import evaluate_scene
from recon4d.scene_folder import SceneFolder

FACTORS = ("direction", "approach", "turn", "spin", "follow")


def pair_dirs(root: Path, seed: int, factor: str, objects: int, camera: str, size: list[int]) -> list[Path]:
    """The two synth scene folders of a pair (generated when missing); none when synth cannot place them."""
    found = sorted((root / "synth").glob(f"synth_s{seed}_{factor}_*"))
    if len(found) != 2:
        args = ["--preset", "tiny", "--out", str(root / "synth"), "--seed", str(seed), "--objects", str(objects),
                "--pairs", factor, "--camera", camera, "--size", *map(str, size)]
        if synth_command.main(args) != 0:  # synth has said why (e.g. the objects cannot all stay in view)
            return []
        found = sorted((root / "synth").glob(f"synth_s{seed}_{factor}_*"))
    return found


def fit(root: Path, synth: Path, priors: str, source: str) -> tuple[Path, float | None]:
    """Fitted scene folder and the seconds the fit took (None when an earlier fit was reused).

    ``source`` "folder" fits the synth folder with its Annotations/ id masks given, as a user gives
    masks (the priors merge them with the motion masks, the answerer reads them); "video" fits its
    video.mp4 alone, as a user's clip (objects from the priors' motion masks).
    """
    scene = root / "fit" / synth.name
    record = scene / "model" / "scene.json"
    if record.exists() and json.loads(record.read_text()).get("stage") == "done":
        return scene, None
    start = time.perf_counter()
    resume = ["--resume"] if record.exists() else []  # a checkpoint of an interrupted fit
    video = synth if source == "folder" else synth / "video.mp4"
    # a synth folder's own Annotations/ are truth and never read as input unless named (io.frames)
    masks = ["--masks", str(synth / "Annotations")] if source == "folder" and priors == "auto" else []
    assert fit_command.main(["--video", str(video), "--out", str(root / "fit"), "--name", synth.name, "--priors", priors,
                             "--preset", "test", *masks, *resume]) == 0
    return scene, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path("out/grounding_eval"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[11])
    ap.add_argument("--factors", nargs="+", default=list(FACTORS))
    ap.add_argument("--objects", type=int, default=2)
    ap.add_argument("--camera", choices=("static", "pan", "dolly", "orbit"), default="static")
    ap.add_argument("--size", type=int, nargs=2, default=[128, 96], metavar=("W", "H"),
                    help="image size of the synth scenes (the tiny preset's by default)")
    ap.add_argument("--priors", choices=("gt", "auto"), default="gt",
                    help="gt: exact priors from the scene's truth; auto: from the video alone")
    ap.add_argument("--input", choices=("folder", "video"), default="folder",
                    help="folder: the synth folder, its id masks given to the priors and the answerer; video: its video.mp4 alone")
    args = ap.parse_args()

    per_kind: dict[str, list[bool]] = defaultdict(list)
    linked, scene_pairs, fit_s, answer_s, fit_rows, priors_rows = [], [], [], [], [], []
    for seed in args.seeds:
        for factor in args.factors:
            correct_by_id = {}
            pair = pair_dirs(args.root, seed, factor, args.objects, args.camera, args.size)
            if not pair:
                print(f"seed {seed} {factor}: skipped (synth could not make the pair)")
                continue
            for synth in pair:
                scene, took = fit(args.root, synth, args.priors, args.input)
                if took is not None:
                    fit_s.append(took)
                m = evaluate_scene(scene, synth)
                novel = m["psnr_novel"] if m["psnr_novel"] is not None else float("nan")  # scenes made with --no-novel
                fit_rows.append((synth.name, m["psnr_train"], novel, m["traj_err_rel"], m["direction_correct"]))
                if args.priors == "auto":  # what the video alone gave, against the truth (the priors' report)
                    priors_rows.append((synth.name, json.loads(SceneFolder(scene).report.read_text())))
                out = args.root / "answers" / f"{synth.name}.jsonl"
                start = time.perf_counter()
                assert answer_command.main(["--scene", str(scene), "--qa", str(synth / "qa.json"), "--out", str(out)]) == 0
                answer_s.append(time.perf_counter() - start)
                meta = {m["id"]: m for m in json.loads((synth / "gt" / "questions.json").read_text())}
                for line in out.read_text().splitlines():
                    r = json.loads(line)
                    per_kind[meta[r["id"]]["kind"]].append(r["correct"])
                    correct_by_id[r["id"]] = (r["correct"], meta[r["id"]].get("partner_id"), r)
            for qid, (ok, partner, _) in correct_by_id.items():
                if partner in correct_by_id and qid < partner:
                    linked.append(ok and correct_by_id[partner][0])
            scene_pairs.append(all(ok for ok, _, _ in correct_by_id.values()))
            wrong = [r for ok, _, r in correct_by_id.values() if not ok]
            print(f"seed {seed} {factor}: {len(correct_by_id) - len(wrong)}/{len(correct_by_id)} right")
            for r in wrong:
                print(f"   WRONG {r['id']}: {r['question']} -> {r['answer']!r} (truth {r['truth']!r}); {r['why']}")

    print(f"\n{'fitted scene':40s} {'psnr_train':>10s} {'psnr_novel':>10s} {'traj_err_rel':>12s}  direction")
    for name, train, novel, traj, direction in fit_rows:
        print(f"{name:40s} {train:10.2f} {novel:10.2f} {traj:12.4f}  {'right' if direction else 'WRONG'}")
    novel = [r[2] for r in fit_rows if r[2] == r[2]]  # NaN: no novel camera
    print(f"motion direction right in {sum(r[4] for r in fit_rows)}/{len(fit_rows)} scenes; "
          f"psnr_train min {min(r[1] for r in fit_rows):.2f}, psnr_novel min {min(novel, default=float('nan')):.2f}, "
          f"traj_err_rel max {max(r[3] for r in fit_rows):.4f}")
    if priors_rows:
        keys = ("rot_err_deg", "trans_dir_err_deg", "focal_err_rel", "track_err_px", "mask_iou")
        print(f"\n{'priors from the video':40s} " + " ".join(f"{k:>17s}" for k in keys) + "  camera model")
        for name, r in priors_rows:
            cells = " ".join(f"{'-' if r.get(k) is None else f'{r[k]:.4f}':>17s}" for k in keys)
            print(f"{name:40s} {cells}  {r['motion_type']}")
    total = [ok for oks in per_kind.values() for ok in oks]
    print("\nper question kind (accuracy, n):")
    for kind, oks in sorted(per_kind.items()):
        print(f"  {kind:28s} {sum(oks) / len(oks):6.3f}  {len(oks)}")
    print(f"overall accuracy {sum(total) / len(total):.3f} ({sum(total)}/{len(total)})")
    print(f"question-pair consistency {sum(linked) / len(linked):.3f} ({sum(linked)}/{len(linked)} linked questions right in both scenes)")
    print(f"scene-pair consistency {sum(scene_pairs) / len(scene_pairs):.3f} ({sum(scene_pairs)}/{len(scene_pairs)} pairs all right)")
    if fit_s:
        print(f"fit {sum(fit_s) / len(fit_s):.0f} s per scene ({len(fit_s)} fitted now)")
    print(f"answer {sum(answer_s) / len(answer_s):.1f} s per scene (load + trajectories + all questions)")


if __name__ == "__main__":
    main()
