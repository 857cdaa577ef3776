"""Pretrain, then fine-tune: is a BERT pretrained here worth fine-tuning?

One run, end to end, from raw text to dev scores (one JSON line on stdout):

1. Corpus: the Project Gutenberg novels in ../shared/data/corpus/gutenberg
   (the bundled corpus's four books among them) through `prepare_corpus`,
   every `--valid_every`-th chapter held out. Vocabulary: the bundled
   lower-cased WordPiece vocabulary (4,291 tokens).
2. Pretraining, the same budget for both sides (`--steps` steps of
   `--batch_size` pairs, `--sequence_length`, the main job's settings):
   - ours: `run_pretraining` (what `recipes/pretrain.py` runs), its export;
   - Hugging Face `BertForPreTraining`, same config, trained on the batches
     of the same pipeline and seed (`pretraining_dataset`), torch AdamW
     with the same groups, schedule and clipping, saved with
     `save_pretrained`.
   Both are scored on the same held-out batches (masked-LM accuracy).
3. Fine-tuning, the same recipe code and budget for every initialisation
   (`--init_checkpoint` of the GLUE recipe, `--preset` of the CoNLL one):
   SST-2 (accuracy), STS-B (Pearson/Spearman) and CoNLL-2003 (entity F1),
   full training sets, `--epochs` epochs, packed rows, each task's learning
   rate (`FINETUNE_LEARNING_RATES`), seeds `--seeds`; initialisations
   `ours` (our export), `huggingface` (HF's checkpoint, read by our loader)
   and `random` (the same architecture, random weights, seeded by the
   fine-tuning seed).
4. Budget curve: ours pretrained for each of `--budget_steps` too, each
   fine-tuned on SST-2 with the first seed; MLM and SST-2 accuracy against
   pretraining minutes, a PNG with `--plot` (needs the `benchmark` extra:
   matplotlib).

Every unit (pretraining run, fine-tuning run) runs in its own process and
writes `<work_dir>/units/<name>.json` with the settings that made it; a rerun
skips finished units, so an interrupted benchmark resumes where it stopped,
and a rerun that asks for other settings in the same `--work_dir` is refused
(one line naming the file and the setting) rather than mixing old scores in.

    python benchmarks/pretrain_then_finetune.py --steps 3000 --budget_steps 300,1000 \\
        --plot docs/results/pretrain_budget_curve.png --output docs/results/pretrain_then_finetune.json

The CPU protocol of issue 17 is 30 minutes of pretraining (`--steps 7000`
at the 520 pairs/s of a 2-core Xeon); the figures in docs/pretraining.md
state the budget they ran.
"""

import argparse
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import time

from keras_bert_impl.checkpoints.atomic_files import atomic_write_json

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED = pathlib.Path(os.environ.get("KERAS_BERT_IMPL_SHARED_DATA", REPO.parent / "shared" / "data"))
TASKS = ("sst2", "stsb", "conll")
INITS = ("ours", "huggingface", "random")
SCORE = {"sst2": "accuracy", "stsb": "pearson", "conll": "dev_f1"}  # the score each task is judged by
# Fine-tuning peak learning rates, per task, the same for every initialisation: from the grid 1e-4, 3e-4, 1e-3,
# the rate with the best dev score averaged over the pretrained and the random starting point (seed 0;
# docs/pretraining.md has the grid). 1e-4, the compact models' usual rate, leaves a tiny model underfitted
# after 3 epochs (CoNLL-2003 dev F1 0.35 from the pretrained model, 0.68 at 1e-3).
FINETUNE_LEARNING_RATES = "sst2=3e-4,stsb=1e-3,conll=1e-3"


def _warmup(steps):
    return max(1, round(steps / 12))  # 150 of 1,800, as the committed results ran (the main job: 100 of 1,000)


# === Units (each runs in its own process) ===

def unit_corpus(args):
    from keras_bert_impl.data.corpus import bundled_corpus, prepare_corpus

    books = sorted(str(p) for p in (SHARED / "corpus" / "gutenberg").glob("*.txt") if p.name != "README.md")
    if not books:
        raise FileNotFoundError(f"{SHARED / 'corpus' / 'gutenberg'}: no books (set KERAS_BERT_IMPL_SHARED_DATA)")
    corpus_dir = os.path.join(args.work_dir, "corpus")
    os.makedirs(corpus_dir, exist_ok=True)
    train, valid = os.path.join(corpus_dir, "train.txt"), os.path.join(corpus_dir, "valid.txt")
    stats = prepare_corpus(books, train, valid_output=valid, valid_every=args.valid_every)
    return {"books": [os.path.basename(b) for b in books], "train": train, "valid": valid,
            "vocab": bundled_corpus()["vocab"],
            "stats": {k: dataclasses.asdict(v) for k, v in stats.items() if v is not None}}


def unit_pretrain_ours(args, steps):
    from keras_bert_impl.training.pretraining_run import PretrainingConfig, run_pretraining

    corpus = _load_unit(args, "corpus")
    model_dir = os.path.join(args.work_dir, f"ours_{steps}")
    config = PretrainingConfig(
        strategy="cpu" if args.cpu else "auto", config=args.config, train_files=[corpus["train"]],
        validation_files=[corpus["valid"]], vocab=corpus["vocab"], sequence_length=args.sequence_length,
        max_predictions_per_seq=args.max_predictions_per_seq, global_batch_size=args.batch_size,
        num_steps=steps, warmup_steps=_warmup(steps), learning_rate=args.learning_rate,
        model_dir=model_dir, checkpoint_every=steps, validation_steps=args.eval_batches, seed=args.data_seed,
        attention_init_stddev=args.attention_init_stddev, verbose=2,
        **({"weight_init": args.weight_init} if args.weight_init else {}),
        **({"position_init": args.position_init} if args.position_init else {}),
    )
    start = time.perf_counter()
    result = run_pretraining(config)
    seconds = time.perf_counter() - start
    return {"steps": steps, "seconds": seconds, "mlm_accuracy": result["validation"].get("mlm_accuracy"),
            "nsp_accuracy": result["validation"].get("nsp_accuracy"), "unigram_floor": result["unigram_floor"],
            "sequences_per_second": result["sequences_per_second"], "checkpoint": result["export_dir"]}


def unit_pretrain_huggingface(args, steps):
    import shutil
    import types

    sys.path.insert(0, str(REPO / "benchmarks"))
    from pretrain_convergence import run_huggingface

    from keras_bert_impl.data.pretraining import pretraining_dataset
    from keras_bert_impl.text.tokenizer import BertTokenizer
    from keras_bert_impl.training.pretraining_run import PretrainingConfig

    corpus = _load_unit(args, "corpus")
    tokenizer = BertTokenizer(corpus["vocab"], lowercase=True)

    def draw(path, count, seed, shuffle):  # the batches `run_pretraining` draws with the same seed
        dataset = pretraining_dataset([path], tokenizer, sequence_length=args.sequence_length,
                                      max_predictions_per_seq=args.max_predictions_per_seq,
                                      batch_size=args.batch_size, seed=seed, shuffle=shuffle, repeat=True)
        return [{k: v.numpy() for k, v in batch.items()} for batch in dataset.take(count)]

    train = draw(corpus["train"], steps, args.data_seed, True)
    valid = draw(corpus["valid"], args.eval_batches, args.data_seed + 1, False)
    checkpoint = os.path.join(args.work_dir, f"huggingface_{steps}")
    settings = types.SimpleNamespace(learning_rate=args.learning_rate, warmup_steps=_warmup(steps), steps=steps,
                                     torch_device="cpu", batch_size=args.batch_size,
                                     adam_beta2=PretrainingConfig.adam_beta2)  # as `run_pretraining` uses
    start = time.perf_counter()
    metrics = run_huggingface(args.config, settings, train, valid, tokenizer.vocabulary_size(), args.data_seed,
                              dropout=0.0, save_to=checkpoint, gather_masked=True)
    seconds = time.perf_counter() - start
    shutil.copy(corpus["vocab"], os.path.join(checkpoint, "vocab.txt"))
    atomic_write_json(os.path.join(checkpoint, "tokenizer_config.json"), {"do_lower_case": True})
    return {"steps": steps, "seconds": seconds, **metrics, "checkpoint": checkpoint}


def unit_random(args, seed):
    import keras

    from keras_bert_impl.checkpoints.own_preset import save_backbone_preset
    from keras_bert_impl.models.backbone import BertBackbone
    from keras_bert_impl.presets import backbone_presets
    from keras_bert_impl.text.tokenizer import BertTokenizer
    from keras_bert_impl.training.pretraining_run import PRESET_ALIASES

    corpus = _load_unit(args, "corpus")
    keras.utils.set_random_seed(seed)
    vocabulary_size = BertTokenizer(corpus["vocab"], lowercase=True).vocabulary_size()
    config = dict(backbone_presets[PRESET_ALIASES.get(args.config, args.config)]["config"],
                  vocabulary_size=vocabulary_size)
    checkpoint = os.path.join(args.work_dir, f"random_{seed}")
    save_backbone_preset(BertBackbone(**config), checkpoint, vocabulary=corpus["vocab"], lowercase=True)
    return {"seed": seed, "checkpoint": checkpoint}


def unit_finetune(args, checkpoint, task, seed, out_dir):
    common = dict(sequence_length=args.finetune_sequence_length, batch_size=args.finetune_batch_size,
                  learning_rate=args.finetune_learning_rate_of[task], epochs=args.finetune_epochs, seed=seed,
                  packing=args.finetune_packing)
    limit = args.train_limit_of.get(task, args.train_limit)
    start = time.perf_counter()
    if task == "conll":
        from keras_bert_impl.tasks.tagging.run import TaggingConfig, run

        summary = run(TaggingConfig(model_dir=out_dir, data_dir=str(SHARED / "conll2003"), preset=checkpoint,
                                    no_test_each_epoch=True, max_train_samples=limit,
                                    max_eval_samples=args.eval_limit, **common))
        scores = {k: summary[k] for k in ("dev_f1", "test_f1")}
        extra = {"train_examples": summary.get("train_sentences"), "best_epoch": summary.get("best_epoch")}
    else:
        from keras_bert_impl.tasks.classification.run import ClassificationConfig, run

        results = run(ClassificationConfig(task=task, data_dir=str(SHARED / "glue"), model_dir=out_dir,
                                           init_checkpoint=checkpoint, preset=checkpoint, predict_test=False,
                                           max_train_samples=limit, max_eval_samples=args.eval_limit, verbose=2,
                                           **common))
        scores = dict(results["best"])
        extra = {"train_examples": results["train_examples"], "best_epoch": results["best_epoch"]}
    return {"task": task, "seed": seed, "checkpoint": checkpoint, "scores": scores,
            "seconds": time.perf_counter() - start, **extra}


# === Orchestration ===

def finetune_unit(init, steps, task, seed):
    """The name of a fine-tuning unit. Random initialisation has no pretraining, so its units are named with 0
    steps and serve every `--steps` budget."""
    return f"finetune:{init}:{0 if init == 'random' else steps}:{task}:{seed}"


def _unit_path(args, name):
    return os.path.join(args.work_dir, "units", f"{name}.json")


def _load_unit(args, name):
    with open(_unit_path(args, name), encoding="utf-8") as f:
        return json.load(f)


class _AdoptedUnit:
    """A unit process started by an earlier invocation (its `.pid` file names a live process running it)."""

    def __init__(self, args, name, pid):
        self.args, self.name, self.pid = args, name, pid

    @classmethod
    def find(cls, args, name):
        try:
            with open(_unit_path(args, name.replace(":", "_")) + ".pid") as f:
                pid = int(f.read())
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                alive = f"--unit\0{name}".encode() in f.read()
        except (OSError, ValueError):
            return None
        return cls(args, name, pid) if alive else None

    def poll(self):
        if os.path.exists(f"/proc/{self.pid}"):
            return None
        return 0 if os.path.exists(_unit_path(self.args, self.name.replace(":", "_"))) else 1

    def wait(self):
        while self.poll() is None:
            time.sleep(1)


def pretraining_recipe(attention_init_stddev=None, weight_init=None, position_init=None):
    """The pretraining settings `run_pretraining` and the HF peer share: beta_2 (no flag sets it) and our
    model's init: the QKV kernels' (the recipe's width-scaled one unless `--attention_init_stddev` names
    another), the other weights' distribution (`--weight_init`, default the recipe's) and the position
    table's starting values (`--position_init`, default the recipe's). BERT's truncated normal and random
    position table, which every unit made before those flags existed used, are left out, so those units
    stay reusable."""
    from keras_bert_impl.training.pretraining_run import PretrainingConfig

    recipe = {"adam_beta2": PretrainingConfig.adam_beta2,
              "attention_init_stddev": (attention_init_stddev or PretrainingConfig.attention_init_stddev
                                        or "sqrt(1.28 / hidden_dim)")}
    weight_init = weight_init or PretrainingConfig.weight_init
    if weight_init != "truncated_normal":
        recipe["weight_init"] = weight_init
    position_init = position_init or PretrainingConfig.position_init
    if position_init != "random":
        recipe["position_init"] = position_init
    return recipe


def unit_settings(args, name):
    """The flags (and recipe defaults) that decide what unit `name` computes. They are written into the unit's
    JSON, and a rerun that asks for other settings in the same `--work_dir` is refused (`check_finished_units`)
    instead of silently reusing a result made differently."""
    kind, *rest = name.split(":")
    if kind == "corpus":
        return {"valid_every": args.valid_every}
    if kind in ("pretrain_ours", "pretrain_huggingface"):
        settings = {k: getattr(args, k) for k in ("config", "batch_size", "sequence_length",
                                                  "max_predictions_per_seq", "learning_rate", "eval_batches",
                                                  "data_seed")}
        recipe = pretraining_recipe(args.attention_init_stddev, args.weight_init, args.position_init)
        settings["adam_beta2"] = recipe["adam_beta2"]
        if kind == "pretrain_ours":
            settings.update({k: v for k, v in recipe.items() if k != "adam_beta2"})
        return settings
    if kind == "random":
        return {"config": args.config}
    if kind == "finetune":
        init, steps, task, seed = rest
        source = f"random:{seed}" if init == "random" else f"pretrain_{init}:{steps}"
        return {"learning_rate": args.finetune_learning_rate_of[task], "epochs": args.finetune_epochs,
                "batch_size": args.finetune_batch_size, "sequence_length": args.finetune_sequence_length,
                "packing": args.finetune_packing, "train_limit": args.train_limit_of.get(task, args.train_limit),
                "eval_limit": args.eval_limit,
                "init": unit_settings(args, source)}
    raise ValueError(f"unknown unit {name!r}")


def _flag_differences(recorded, wanted, prefix=""):
    """`setting recorded -> wanted` for each setting that differs (`init.setting`: the starting point's)."""
    out = []
    for key in sorted(set(recorded) | set(wanted)):
        a, b = recorded.get(key), wanted.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _flag_differences(a, b, prefix + key + ".")
        elif a != b:
            out.append(f"{prefix}{key} {a!r} -> {b!r}")
    return out


def check_finished_units(args, names):
    """Refuses, in one line, to reuse a finished unit of `names` that was made with other settings than this
    run's (or that records none: made before settings were recorded), naming the file and the settings."""
    for name in names:
        path = _unit_path(args, name.replace(":", "_"))
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            recorded = json.load(f).get("settings")
        wanted = unit_settings(args, name)
        if recorded is None:
            raise SystemExit(f"{path}: records no settings (made by an older version of this benchmark), so it "
                             "cannot be reused safely; delete it to redo it, or use another --work_dir")
        differences = _flag_differences(recorded, json.loads(json.dumps(wanted)))
        if differences:
            raise SystemExit(f"{path}: made with other settings than this run asks for ({'; '.join(differences)});"
                             " use another --work_dir, or delete the file to redo it")


def run_unit(args, name):
    """Runs unit `name` in this process and writes its JSON (with the settings that made it)."""
    kind, *rest = name.split(":")
    if kind == "corpus":
        result = unit_corpus(args)
    elif kind == "pretrain_ours":
        result = unit_pretrain_ours(args, int(rest[0]))
    elif kind == "pretrain_huggingface":
        result = unit_pretrain_huggingface(args, int(rest[0]))
    elif kind == "random":
        result = unit_random(args, int(rest[0]))
    elif kind == "finetune":
        init, steps, task, seed = rest[0], int(rest[1]), rest[2], int(rest[3])
        source = f"random:{seed}" if init == "random" else f"pretrain_{init}:{steps}"
        checkpoint = _load_unit(args, source.replace(":", "_"))["checkpoint"]
        out_dir = os.path.join(args.work_dir, "finetune", name.replace(":", "_"))
        result = unit_finetune(args, checkpoint, task, seed, out_dir)
    else:
        raise ValueError(f"unknown unit {name!r}")
    atomic_write_json(_unit_path(args, name.replace(":", "_")),
                      {"unit": name, **result, "settings": unit_settings(args, name)})


def plan(args):
    """The units in the order they start: the compared pretraining runs, every task and initialisation
    with the first seed, the budget curve, then the other seeds."""
    seeds, steps = args.seed_list, args.steps
    units = ["corpus", f"pretrain_ours:{steps}"]
    if "huggingface" in args.init_list:
        units.append(f"pretrain_huggingface:{steps}")
    units += [f"random:{s}" for s in seeds if "random" in args.init_list]
    for index, seed in enumerate(seeds):
        for task in args.task_list:
            units += [finetune_unit(init, steps, task, seed) for init in args.init_list]
        if index == 0:
            for budget in args.budget_list:
                units += [f"pretrain_ours:{budget}", f"finetune:ours:{budget}:sst2:{seed}"]
    return units


def dependencies(name):
    """The units whose JSON `name` reads."""
    kind, *rest = name.split(":")
    if kind == "corpus":
        return []
    if kind == "finetune":
        init, steps, _, seed = rest
        return ["corpus", f"random:{seed}" if init == "random" else f"pretrain_{init}:{steps}"]
    return ["corpus"]


def summarize(args, units):
    """The one JSON line: pretraining figures, per-task scores per initialisation (mean, seeds, spread),
    whether each pretrained initialisation beats random by more than the seed spread, and the budget curve."""
    get = lambda name: units.get(name.replace(":", "_"))  # noqa: E731
    pretraining = {}
    for init in ("ours", "huggingface"):
        unit = get(f"pretrain_{init}:{args.steps}")
        if unit:
            pretraining[init] = {k: unit.get(k) for k in ("steps", "seconds", "mlm_accuracy", "nsp_accuracy",
                                                           "unigram_floor", "sequences_per_second")}
            # The recipe's width-scaled QKV init is ours; the peer keeps what `transformers` draws.
            recipe = pretraining_recipe(args.attention_init_stddev, args.weight_init, args.position_init)
            pretraining[init]["initialization"] = (
                f"attention_init_stddev {recipe['attention_init_stddev']}, other weights "
                f"{recipe.get('weight_init', 'truncated_normal')} 0.02, position table "
                f"{recipe.get('position_init', 'random')}"
                if init == "ours"
                else "transformers' own: BertConfig.initializer_range 0.02 everywhere")
    finetuning = {}
    for task in args.task_list:
        finetuning[task] = {}
        for init in args.init_list:
            runs = [get(finetune_unit(init, args.steps, task, s)) for s in args.seed_list]
            runs = [r for r in runs if r]
            if not runs:
                continue
            values = [r["scores"][SCORE[task]] for r in runs]
            finetuning[task][init] = {
                "metric": SCORE[task], "mean": sum(values) / len(values), "seeds": values,
                "spread": max(values) - min(values), "all_scores": [r["scores"] for r in runs],
                "mean_seconds": sum(r["seconds"] for r in runs) / len(runs),
            }
        random_run = finetuning[task].get("random")
        for init in ("ours", "huggingface"):
            run = finetuning[task].get(init)
            if run and random_run and len(run["seeds"]) == len(random_run["seeds"]) > 1:
                gain = run["mean"] - random_run["mean"]
                run["gain_over_random"] = gain
                run["beats_random_beyond_spread"] = gain > max(run["spread"], random_run["spread"])
                run["worst_seed_above_best_random_seed"] = min(run["seeds"]) > max(random_run["seeds"])
        if "ours" in finetuning[task] and "huggingface" in finetuning[task]:
            finetuning[task]["ours_minus_huggingface"] = (finetuning[task]["ours"]["mean"]
                                                          - finetuning[task]["huggingface"]["mean"])
    curve = []
    # Runs made at different times (or beside other jobs) ran at different rates; the curve's x axis puts every
    # budget at one rate, the --steps run's, and keeps each run's own minutes beside it.
    main_run = get(f"pretrain_ours:{args.steps}")
    rate = main_run["sequences_per_second"] if main_run else None
    for budget in sorted(set(args.budget_list) | {args.steps}):
        pre, fine = get(f"pretrain_ours:{budget}"), get(f"finetune:ours:{budget}:sst2:{args.seed_list[0]}")
        if pre:
            loop_minutes = budget * args.batch_size / pre["sequences_per_second"] / 60
            curve.append({"steps": budget, "pretraining_minutes": loop_minutes, "wall_minutes": pre["seconds"] / 60,
                          "minutes_at_main_rate": budget * args.batch_size / (rate or pre["sequences_per_second"]) / 60,
                          "sequences_per_second": pre["sequences_per_second"],
                          "mlm_accuracy": pre["mlm_accuracy"], "unigram_floor": (pre["unigram_floor"] or {}).get("accuracy"),
                          "sst2_accuracy": fine["scores"]["accuracy"] if fine else None})
    random_sst2 = get(finetune_unit("random", args.steps, "sst2", args.seed_list[0]))
    return {
        "benchmark": "pretrain_then_finetune", "config": args.config, "steps": args.steps,
        "batch_size": args.batch_size, "sequence_length": args.sequence_length,
        "learning_rate": args.learning_rate, **pretraining_recipe(args.attention_init_stddev, args.weight_init, args.position_init),
        "finetune": {
            "learning_rate": args.finetune_learning_rate_of, "epochs": args.finetune_epochs,
            "batch_size": args.finetune_batch_size, "sequence_length": args.finetune_sequence_length,
            "packing": args.finetune_packing, "train_limit": args.train_limit, "train_limits": args.train_limit_of,
            "eval_limit": args.eval_limit, "seeds": args.seed_list},
        "cpu_count": os.cpu_count(), "pretraining": pretraining, "finetuning": finetuning,
        "budget_curve": curve,
        "random_init_sst2_accuracy": random_sst2["scores"]["accuracy"] if random_sst2 else None,
        "units_missing": [u for u in plan(args) if not get(u)],
    }


def plot_curve(summary, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = summary["budget_curve"]
    minutes = [p.get("minutes_at_main_rate", p["pretraining_minutes"]) for p in curve]
    rate = (summary["pretraining"].get("ours") or {}).get("sequences_per_second")
    xlabel = f"pretraining minutes (at {rate:.0f} pairs/s, 2 CPU cores)" if rate else "pretraining minutes (2 CPU cores)"
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    left.plot(minutes, [p["mlm_accuracy"] for p in curve], "o-", label="held-out MLM accuracy")
    left.plot(minutes, [p["unigram_floor"] for p in curve], "--", color="grey", label="unigram floor")
    left.set_xlabel(xlabel)
    left.set_ylabel("accuracy")
    left.set_title("masked-LM")
    left.legend()
    points = [(m, p["sst2_accuracy"]) for m, p in zip(minutes, curve) if p["sst2_accuracy"] is not None]
    right.plot([m for m, _ in points], [a for _, a in points], "o-", label="pretrained here")
    if summary.get("random_init_sst2_accuracy") is not None:
        right.axhline(summary["random_init_sst2_accuracy"], ls="--", color="grey", label="random init")
    right.set_xlabel(xlabel)
    right.set_ylabel("SST-2 dev accuracy")
    right.set_title(f"SST-2, fine-tuned {summary['finetune']['epochs']} epoch(s)")
    right.legend()
    fig.suptitle(f"BERT-{summary['config']} pretrained on Gutenberg, then fine-tuned")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _learning_rates(parser, text):
    """{task: fine-tuning learning rate} from `--finetune_learning_rate` ("3e-4" or "sst2=3e-4,conll=1e-3")."""
    rates = dict(_learning_rates(parser, FINETUNE_LEARNING_RATES)) if text != FINETUNE_LEARNING_RATES else {}
    try:
        if "=" not in text:
            rates = {task: float(text) for task in TASKS}
        for item in text.split(",") if "=" in text else []:
            task, rate = item.split("=")
            if task not in TASKS:
                parser.error(f"--finetune_learning_rate: unknown task {task!r}; choose from {', '.join(TASKS)}")
            rates[task] = float(rate)
    except ValueError:
        parser.error(f"--finetune_learning_rate: expected a number or task=number[,task=number], got {text!r}")
    if any(rate <= 0 for rate in rates.values()):
        parser.error(f"--finetune_learning_rate: rates must be > 0, got {text!r}")
    return rates


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work_dir", default=str(REPO / ".bench" / "pretrain_then_finetune"),
                        help="corpus, checkpoints, fine-tuning runs and per-unit JSON (reused: a rerun resumes)")
    parser.add_argument("--config", default="tiny", help="backbone size: tiny, mini, small, ...")
    parser.add_argument("--steps", type=int, default=3000, help="pretraining steps of the compared models")
    parser.add_argument("--budget_steps", default="300,1000",
                        help="further pretraining budgets (steps) for the curve, fine-tuned on SST-2 only")
    parser.add_argument("--batch_size", type=int, default=128, help="pretraining pairs per step")
    parser.add_argument("--sequence_length", type=int, default=64, help="pretraining sequence length")
    parser.add_argument("--max_predictions_per_seq", type=int, default=10)
    parser.add_argument("--learning_rate", type=float, default=3e-3, help="pretraining peak learning rate")
    parser.add_argument("--attention_init_stddev", type=float, default=None,
                        help="our model's QKV kernel init stddev (default: the recipe's sqrt(1.28 / hidden_dim); "
                             "0.02 is the HF peer's)")
    parser.add_argument("--weight_init", choices=("truncated_normal", "normal"), default=None,
                        help="our model's other kernels and embeddings: BERT's truncated normal or transformers' "
                             "plain normal (the HF peer's), both stddev 0.02 (default: the recipe's, "
                             "PretrainingConfig.weight_init)")
    parser.add_argument("--position_init", choices=("sinusoidal", "random"), default=None,
                        help="our model's position table: sine/cosine starting values or a random draw (the HF "
                             "peer's) (default: the recipe's, PretrainingConfig.position_init)")
    parser.add_argument("--eval_batches", type=int, default=20, help="held-out pretraining batches scored")
    parser.add_argument("--valid_every", type=int, default=10, help="every N-th chapter is held out")
    parser.add_argument("--data_seed", type=int, default=0)
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--inits", default=",".join(INITS))
    parser.add_argument("--seeds", default="0,1,2", help="fine-tuning seeds (random init: also its weights)")
    parser.add_argument("--finetune_learning_rate", default=FINETUNE_LEARNING_RATES,
                        help="one peak learning rate for every task, or task=rate[,task=rate] (tasks not named "
                             "keep their default); every initialisation of a task uses the same rate")
    parser.add_argument("--finetune_epochs", type=int, default=3)
    parser.add_argument("--finetune_batch_size", type=int, default=32)
    parser.add_argument("--finetune_sequence_length", type=int, default=128)
    parser.add_argument("--finetune_packing", choices=("true", "false"), default="true",
                        help="train on packed rows (several examples per row, as many examples per step as "
                             "unpacked; the recipes' --packing): SST-2's 67k sentences average 19 pieces")
    parser.add_argument("--max_train_samples", "--train_limit", dest="train_limit", type=int, default=None,
                        help="first N training examples of each task (default: the full training sets)")
    parser.add_argument("--train_limits", default="",
                        help="per-task first-N training examples, e.g. sst2=20000 (overrides --max_train_samples)")
    parser.add_argument("--max_eval_samples", "--eval_limit", dest="eval_limit", type=int, default=None,
                        help="first N dev (and CoNLL test) examples (default: all; for smoke runs)")
    parser.add_argument("--cpu", action="store_true", help="pretrain with --strategy cpu")
    parser.add_argument("--parallel", type=int, default=2,
                        help="fine-tuning runs at once (pretraining runs alone); tiny models leave cores idle")
    parser.add_argument("--output", default=None, help="also write the JSON line here")
    parser.add_argument("--plot", default=None, help="write the budget curve PNG here (needs matplotlib)")
    parser.add_argument("--summary_only", action="store_true",
                        help="report the units finished so far (missing ones are listed), run nothing")
    parser.add_argument("--unit", default=None, help=argparse.SUPPRESS)  # internal: run one unit
    args = parser.parse_args(argv)
    args.seed_list = [int(s) for s in args.seeds.split(",") if s]
    args.finetune_packing = args.finetune_packing == "true"
    args.finetune_learning_rate_of = _learning_rates(parser, args.finetune_learning_rate)
    try:
        args.train_limit_of = {t: int(n) for t, n in (item.split("=") for item in args.train_limits.split(",") if item)}
    except ValueError:
        parser.error(f"--train_limits: expected task=N[,task=N], got {args.train_limits!r}")
    args.budget_list = [int(s) for s in args.budget_steps.split(",") if s]
    args.task_list = [t for t in args.tasks.split(",") if t]
    args.init_list = [i for i in args.inits.split(",") if i]
    for name, values, allowed in (("--tasks", args.task_list, TASKS), ("--inits", args.init_list, INITS)):
        unknown = sorted(set(values) - set(allowed))
        if unknown:
            parser.error(f"{name}: unknown {unknown}; choose from {', '.join(allowed)}")
    if args.attention_init_stddev is not None and not args.attention_init_stddev > 0:
        parser.error(f"--attention_init_stddev: expected a number > 0, got {args.attention_init_stddev}")
    if args.steps < 1 or any(b < 1 for b in args.budget_list) or not args.seed_list:
        parser.error("--steps and --budget_steps must be >= 1 and --seeds must name at least one seed")
    return args, argv


def main(argv=None):
    args, argv = parse_args(argv)
    if args.unit:
        run_unit(args, args.unit)
        return 0
    os.makedirs(os.path.join(args.work_dir, "units"), exist_ok=True)
    names = plan(args)
    check_finished_units(args, names)
    if args.summary_only:
        return _report(args)
    forwarded = [a for a in (sys.argv[1:] if argv is None else argv)]
    done = {n for n in names if os.path.exists(_unit_path(args, n.replace(":", "_")))}
    pending = [n for n in names if n not in done]
    running = {}  # name -> (process, log file, start time)
    for name in list(pending):  # units still running from an interrupted invocation: wait for them
        process = _AdoptedUnit.find(args, name)
        if process is not None:
            print(f"[{names.index(name) + 1}/{len(names)}] {name} still running (pid {process.pid}): waiting for it",
                  file=sys.stderr, flush=True)
            running[name] = (process, open(os.devnull, "w"), time.perf_counter())
            pending.remove(name)
    while pending or running:
        for name in list(pending):  # start what may start, in plan order, up to --parallel at once
            # Our pretraining runs alone (its timing is a result); the peer's pretraining, whose seq/s only
            # describes the peer, may share the machine with fine-tuning runs.
            exclusive = ("corpus", "pretrain_ours")
            if len(running) >= (1 if name.startswith(exclusive) else args.parallel) or any(
                    r.startswith(exclusive) for r in running):
                break
            if not all(d in done for d in dependencies(name)):
                continue
            log = os.path.join(args.work_dir, "units", name.replace(":", "_") + ".log")
            print(f"[{names.index(name) + 1}/{len(names)}] {name} (log: {log})", file=sys.stderr, flush=True)
            f = open(log, "w", encoding="utf-8")
            process = subprocess.Popen([sys.executable, __file__, *forwarded, "--unit", name], stdout=f,
                                       stderr=subprocess.STDOUT, cwd=str(REPO))
            with open(_unit_path(args, name.replace(":", "_")) + ".pid", "w") as pid_file:
                pid_file.write(str(process.pid))
            running[name] = (process, f, time.perf_counter())
            pending.remove(name)
        time.sleep(1)
        for name, (process, f, start) in list(running.items()):
            code = process.poll()
            if code is None:
                continue
            f.close()
            del running[name]
            if code != 0:
                for other, (p, g, _) in running.items():
                    p.wait()
                    g.close()
                print(f"{name} failed (exit {code}); see {f.name}. Rerun the same command to resume.",
                      file=sys.stderr)
                return code
            done.add(name)
            scores = _load_unit(args, name.replace(":", "_")).get("scores")
            print(f"    {name} done in {time.perf_counter() - start:.0f} s{': ' + json.dumps(scores) if scores else ''}",
                  file=sys.stderr, flush=True)
    return _report(args)


def _report(args):
    """Prints (and writes) the JSON line of the finished units, and the plot."""
    units = {}
    for path in pathlib.Path(args.work_dir, "units").glob("*.json"):
        units[path.stem] = json.loads(path.read_text(encoding="utf-8"))
    summary = summarize(args, units)
    line = json.dumps(summary)
    print(line)
    if args.output:
        atomic_write_json(args.output, summary)
    if args.plot:
        plot_curve(summary, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
