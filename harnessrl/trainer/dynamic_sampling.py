"""DAPO's dynamic sampling, as a part of :class:`~harnessrl.trainer.grpo_trainer.HarnessGRPOTrainer`.

DAPO's dynamic sampling (``dapo_eps`` set) lives in the same hook: a scored batch's groups whose reward
std is below ``dapo_eps`` are dropped and further tasks (a new draw of task sampling, same step) are
generated and scored until the batch holds ``tasks_per_step`` such groups or ``dapo_max_extra_groups``
extra groups were spent; then the kept groups' TRL outputs are concatenated (prompts left-padded,
completions right-padded to the longest). With TRL's default per-group reward scaling each group's
advantages depend on that group alone, so the concatenated advantages are exactly what one call would
have given; per-token log-probabilities computed in a round stay valid under the extra padding for
rotary-position models (attention sees only relative positions, and padding is masked).

:class:`DynamicSampling` holds the refill, the merge of several rounds' TRL outputs, and the metrics that
describe the trained batch; the trainer mixes it in and calls :meth:`DynamicSampling._dynamic_sampling`
from its generation hook when ``dapo_eps`` is set (``method: dapo``).
"""

from __future__ import annotations

from harnessrl.errors import ConfigError
from harnessrl.records.steps import RolloutRecord, group_stats
from harnessrl.trainer.rows import TRLBatch

__all__ = ["DynamicSampling"]

_RIGHT_PADDED: dict[str, float | None] = {
    # per-token tensors of TRL's output, and the value their padding takes (None: the tokenizer's pad id)
    "completion_ids": None,
    "completion_mask": 0,
    "old_per_token_logps": 0.0,
    "sampling_per_token_logps": 0.0,
    "ref_per_token_logps": 0.0,
    "tool_mask": 1,
}


class DynamicSampling:
    """Generate, drop flat groups, refill from task sampling, merge: DAPO's dynamic sampling over the
    trainer's own generation and scoring (``harness_rows``, ``_score_rows``, ``step_records``) and
    accounting. Mixed into the trainer (its attributes: ``num_generations``, ``dapo_eps``,
    ``dapo_max_extra_groups``, ``accounting``, TRL's ``_metrics``, ``accelerator`` and tokenizer)."""

    def _dynamic_sampling(self, n_rows: int, step: int) -> tuple[TRLBatch, list[RolloutRecord], list[RolloutRecord]]:
        """Generate and score until the batch holds ``n_rows // G`` groups with reward std >= ``dapo_eps``
        (or the extra-group cap is spent); returns the merged TRL output and the kept and dropped rollouts."""
        g_size = self.num_generations
        target = n_rows // g_size
        metrics = self._metrics["train"]
        marks = {k: len(v) for k, v in metrics.items()}
        outs: list[TRLBatch] = []
        groups: list[tuple[float, int, int, list[RolloutRecord]]] = []  # (std, round, first row, rollouts)
        drawn: list[str] = []
        need, extra_left, draw = target, self.dapo_max_extra_groups, 0
        while True:
            rows = self.harness_rows(need * g_size, step, draw=draw, exclude=tuple(drawn))
            outs.append(self._score_rows(rows))
            rollouts = self.step_records.rollouts(step, rows)
            for start in range(0, len(rows), g_size):
                _, std = group_stats([r.reward for r in rollouts[start : start + g_size]])
                groups.append((-1.0 if std is None else std, draw, start, rollouts[start : start + g_size]))
            drawn += [r["task_id"] for r in rows[::g_size]]
            good = sum(std >= self.dapo_eps for std, *_ in groups)
            need = min(target - good, extra_left)
            if need <= 0:
                break
            extra_left -= need
            draw += 1
        keep = [g for g in groups if g[0] >= self.dapo_eps][:target]
        if len(keep) < target:  # the cap is spent: fill with the dropped groups closest to discriminative
            rest = sorted((g for g in groups if g[0] < self.dapo_eps), key=lambda g: -g[0])
            keep += rest[: target - len(keep)]
        kept_ids = {(g[1], g[2]) for g in keep}
        keep.sort(key=lambda g: (g[1], g[2]))  # the order they were generated in
        dropped = [g for g in groups if (g[1], g[2]) not in kept_ids]
        picks: list[list[int]] = [[] for _ in outs]
        for _, rnd, start, _ in keep:
            picks[rnd].extend(range(start, start + g_size))
        out = self._merge_outputs(outs, picks)
        kept_rollouts = [r for g in keep for r in g[3]]
        dropped_rollouts = [r.model_copy(update={"trained": False}) for g in dropped for r in g[3]]
        self.accounting["rollouts/discarded"] += len(dropped_rollouts)
        self._replace_round_metrics(marks, kept_rollouts, out)
        metrics["dapo/discarded_groups"].append(float(len(dropped)))
        metrics["dapo/extra_groups"].append(float(len(groups) - target))
        metrics["dapo/rounds"].append(float(len(outs)))
        return out, kept_rollouts, dropped_rollouts

    def _merge_outputs(self, outs: list[TRLBatch], picks: list[list[int]]) -> TRLBatch:
        """Concatenate the picked rows of several TRL outputs into one (prompts left-, completions right-padded)."""
        import torch

        known = {"prompt_ids", "prompt_mask", "advantages", "num_items_in_batch", "importance_sampling_ratio"}
        known |= set(_RIGHT_PADDED)
        keys = set(outs[0])
        unsupported = keys - known
        if unsupported or any(set(o) != keys for o in outs):
            raise ConfigError(
                f"method 'dapo' cannot merge TRL outputs with {sorted(unsupported) or 'differing keys'} "
                "(multimodal inputs are not supported by its refill): choose another method"
            )
        pad_id = self._tokenizer.pad_token_id
        p_len = max(o["prompt_ids"].size(1) for o in outs)
        c_len = max(o["completion_ids"].size(1) for o in outs)
        sequence_level = self.vllm_importance_sampling_mode in ("sequence_mask", "sequence_truncate")

        def take(t, idx, width: int | None = None, left: bool = False, value=0):
            t = t[idx]
            if width is None or t.size(1) == width:
                return t
            fill = torch.full((t.size(0), width - t.size(1)), value, dtype=t.dtype, device=t.device)
            return torch.cat([fill, t] if left else [t, fill], dim=1)

        merged: dict[str, list] = {k: [] for k in keys if k != "num_items_in_batch"}
        for o, rows in zip(outs, picks, strict=True):
            if not rows:
                continue
            idx = torch.tensor(rows, dtype=torch.long, device=o["prompt_ids"].device)
            merged["prompt_ids"].append(take(o["prompt_ids"], idx, p_len, left=True, value=pad_id))
            merged["prompt_mask"].append(take(o["prompt_mask"], idx, p_len, left=True, value=0))
            merged["advantages"].append(o["advantages"][idx])
            for k, value in _RIGHT_PADDED.items():
                if k in o:
                    merged[k].append(take(o[k], idx, c_len, value=pad_id if value is None else value))
            if "importance_sampling_ratio" in o:
                ratio = o["importance_sampling_ratio"]
                merged["importance_sampling_ratio"].append(
                    take(ratio, idx) if sequence_level else take(ratio, idx, c_len, value=1.0)
                )
        out: TRLBatch = {k: torch.cat(v, dim=0) for k, v in merged.items()}
        loss_mask = out["completion_mask"] if "tool_mask" not in out else out["completion_mask"] * out["tool_mask"]
        out["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        return out

    def _replace_round_metrics(self, marks: dict[str, int], kept: list[RolloutRecord], out: TRLBatch) -> None:
        """TRL logged reward and length statistics once per round; make them describe the trained batch."""
        import torch
        from trl.trainer.utils import nanstd

        m = self._metrics["train"]
        rewards = torch.tensor([float("nan") if r.reward is None else r.reward for r in kept], dtype=torch.float32)
        group_std = nanstd(rewards.view(-1, self.num_generations), dim=1)
        lengths = torch.tensor([r.length_tokens for r in kept], dtype=torch.float32)
        ids = out["completion_ids"]
        eos_and_pad = {*self.eos_token_ids, self._tokenizer.pad_token_id}
        truncated = torch.tensor(
            [n > 0 and int(ids[i, n - 1]) not in eos_and_pad for i, n in enumerate(lengths.long().tolist())]
        )
        term = lengths[~truncated] if (~truncated).any() else torch.zeros(1)
        values = {
            "reward": torch.nanmean(rewards).item(),
            "reward_std": nanstd(rewards).item(),
            "frac_reward_zero_std": torch.isclose(group_std, torch.zeros_like(group_std)).float().mean().item(),
            "completions/mean_length": lengths.mean().item(),
            "completions/min_length": lengths.min().item(),
            "completions/max_length": lengths.max().item(),
            "completions/clipped_ratio": truncated.float().mean().item(),
            "completions/mean_terminated_length": term.mean().item(),
            "completions/min_terminated_length": term.min().item(),
            "completions/max_terminated_length": term.max().item(),
        }
        for name in self.reward_func_names:  # one reward function (the rubric): its stats are the reward's
            values[f"rewards/{name}/mean"] = values["reward"]
            values[f"rewards/{name}/std"] = values["reward_std"]
        for key, value in values.items():
            if key in m:
                del m[key][marks.get(key, 0) :]
                m[key].append(value)
