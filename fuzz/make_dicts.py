#!/usr/bin/env python3
"""Writes fuzz/dict/<target>.dict: libFuzzer dictionaries of the keywords of each format.

The keywords are the string literals of the reader's source files that look like field names or
enum values ("step", "format_version", "all_reduce"), quoted as JSON keys and values, plus the JSON
punctuation every JSON target shares. Rerun after a reader gains fields:
    python3 fuzz/make_dicts.py
"""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "libcore" / "src"
# target -> the reader sources whose literals are its keywords
READERS = {
    "release_policy": ["decision/policy.cpp"],
    "release_record": ["decision/record.cpp", "decision/evidence.cpp"],
    "registry_pointer": ["decision/registry.cpp", "decision/monitoring_record.cpp"],
    "monitoring_record": ["decision/monitoring_record.cpp"],
    "cost_table": ["decision/costs.cpp"],
    "stages_jsonl": ["telemetry/stage_record.cpp", "decision/cost_accounting.cpp"],
    "step_log": ["telemetry/step_log.cpp"],
    "restart_log": ["launch/restart_log.cpp", "launch/attempt_verdict.cpp"],
    "flight_record": ["diagnose/flight_dump.cpp", "comm/flight_recorder.cpp"],
    "rank_hosts": ["telemetry/rank_hosts.cpp"],
    "collectives_sweep": ["scaling/fit.cpp", "stepmodel/sweep.cpp"],
    "step_model": ["stepmodel/step_model.cpp", "stepmodel/two_level.cpp"],
    "ckpt_manifest": ["ckpt/format.cpp"],
    "ckpt_index": ["ckpt/read.cpp", "ckpt/internal.cpp", "ckpt/write.cpp", "ckpt/format.cpp", "base/dtype.cpp"],
    "ckpt_pieces": ["ckpt/read.cpp", "ckpt/internal.cpp", "ckpt/write.cpp", "base/dtype.cpp"],
    "safetensors": ["ckpt/safetensors.cpp"],
    "hf_config": ["model/hf_import.cpp"],
    "data_prep_jsonl": ["data/data_prep.cpp"],
    "dataset_attributes": ["data/dataset.cpp", "data/dataset_reader.cpp"],
    "trainer_cli": ["tool/train_cli.cpp"],
}
# Targets whose input is a language of their own (changes made through the HDF5 API): its keywords
# are the string literals of the target's files, relative to the repository root.
LANGUAGE = {
    "ckpt_index": ["fuzz/targets/ckpt_index.cpp", "fuzz/ckpt_fixture.hpp"],
    "ckpt_pieces": ["fuzz/targets/ckpt_pieces.cpp", "fuzz/ckpt_fixture.hpp"],
    "dataset_attributes": ["fuzz/targets/dataset_attributes.cpp"],
}
JSON_PUNCTUATION = ['"{"', '"}"', '"["', '"]"', '":"', '","', '"null"', '"true"', '"false"', '"-1"', '"0"',
                    '"1e308"', '"-1e308"', '"9223372036854775807"', '"18446744073709551616"', '"\\\\u0000"']
WORD = re.compile(r'"([A-Za-z_][A-Za-z0-9_./-]{1,40})"')
POINTER = re.compile(r'"((?:/[A-Za-z_][A-Za-z0-9_]*)+)"')  # JsonFile field pointers: "/eval/holdout_loss"
OPTION = re.compile(r'"(--[a-z][a-z0-9-]*)"')


def keywords(files, root=SRC):
    words = set()
    for name in files:
        path = root / name
        if path.exists():
            text = path.read_text()
            if root == ROOT:  # a target's own file: its #include lines name headers, not keywords
                text = "\n".join(line for line in text.splitlines() if not line.startswith("#include"))
            words.update(WORD.findall(text))
            words.update(OPTION.findall(text))
            for pointer in POINTER.findall(text):
                words.update(part for part in pointer.split("/") if part)
    return sorted(words)


def main():
    out = ROOT / "fuzz" / "dict"
    out.mkdir(exist_ok=True)
    for target, files in READERS.items():
        lines = []
        for word in sorted(set(keywords(files)) | set(keywords(LANGUAGE.get(target, []), ROOT))):
            if target == "trainer_cli":
                if word.startswith("--"):
                    lines.append('"%s"' % word)
                continue
            lines.append('"\\"%s\\""' % word)
        if target == "trainer_cli":
            lines += ['"\\x0A"', '"0"', '"-1"', '"2147483647"', '"2147483648"', '"-2147483649"', '"1e308"',
                      '"nan"', '"inf"', '"9223372036854775807"']
        elif target not in ("safetensors",):
            lines += JSON_PUNCTUATION
        else:
            lines += JSON_PUNCTUATION + ['"F32"', '"BF16"', '"F16"', '"I64"', '"dtype"', '"shape"', '"data_offsets"',
                                         '"__metadata__"']
        (out / (target + ".dict")).write_text("# keywords of %s (fuzz/make_dicts.py)\n" % target + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
