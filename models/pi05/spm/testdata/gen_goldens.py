#!/usr/bin/python3
"""Train small SentencePiece models with Debian's spm_train and write golden ids.

Run from this folder with Debian's python3 (python3-sentencepiece, sentencepiece):
    /usr/bin/python3 gen_goldens.py
It rewrites *.model and golden_*.jsonl. The Go tests only read the committed outputs.
"""
import json
import random
import subprocess

import sentencepiece as spm

WORDS = """pick up the red block and place it in the blue bowl open drawer close door push button
move arm left right forward backward grasp release rotate wrist gripper camera table cup spoon fork
plate towel fold the shirt wipe counter put banana into basket stack cubes on top of each other
task state action robot kitchen sink water bottle lid turn knob slowly carefully quickly
Task: State: Action: 0 1 2 3 4 5 6 7 8 9 10 42 128 255 127 64 200 -1 3.14""".split()
UNICODE = ["café", "naïve", "Ärger", "Straße", "ｆｕｌｌｗｉｄｔｈ", "①②③", "東京", "ロボット", "😀", "🤖",
           "Ω", "ﬁ", "…", "\u00a0", "\t", "\u3000", "مرحبا", "שלום", "Привет"]


def corpus_lines(rng):
    for _ in range(6000):
        n = rng.randint(3, 16)
        words = [rng.choice(WORDS) for _ in range(n)]
        if rng.random() < 0.15:
            words.insert(rng.randrange(len(words) + 1), rng.choice(UNICODE[:8]))
        yield " ".join(words)


def test_strings(rng):
    fixed = [
        "", " ", "  ", "a", "hello", " hello", "hello ", "hello  world", "  leading and trailing  ",
        "Task: pick up the red block, State: 128 130 0 255 17;\nAction: ",
        "Task: fold the towel, State: ;\nAction: ",
        "<loc0012><seg003> pick", "x<loc0012>y", "<s> literal control </s>", "<unk>", "<0x41>",
        "new\nline", "tab\there", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ", "①②③ ⑩", "ﬁne ﬂow", "東京タワー", "🤖 robot 😀",
        "Straße café naïve", "\u00a0nbsp\u00a0", "ideographic\u3000space", "zero\u200bwidth",
        "Ω ohm Ω", "e\u0301 combining", "ÅÅ", "mixed 123abc456 digits", "3.14159 and -2.5",
        "unseen ⛵ glyphs ⚙ ☂", "ไทย", "한국어", "ẞ", "\x01\x02 ctrl", "a" * 120,
        "the the the the the", "pickup pick up picked picking", "🤖🤖🤖", "…...",
        "ppp", "ooo", "lllll", "tttt", "55555", "000 000", "pp ppp pppp",
        "a  b   c    d     e", "<start_of_turn>user\nhi<end_of_turn>", "\u2581\u2581x \u2581", "     ",
    ]
    out = list(fixed)
    alphabet = list("abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789.,;:!?-_'\"()\n\t") + UNICODE + ["⛵", "☂", "€", "ß"]
    for _ in range(300):
        n = rng.randint(1, 40)
        if rng.random() < 0.5:
            s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 10)))
            for _ in range(rng.randint(0, 3)):
                i = rng.randrange(len(s) + 1)
                s = s[:i] + rng.choice(alphabet) + s[i:]
        else:
            s = "".join(rng.choice(alphabet) for _ in range(n))
        out.append(s)
    return out


MODELS = {
    # PaliGemma-like: BPE with byte fallback, identity normalisation, no dummy prefix, special ids 0..3.
    "bpe_bytefallback": [
        "--model_type=bpe", "--vocab_size=700", "--byte_fallback=true", "--normalization_rule_name=identity",
        "--add_dummy_prefix=false", "--remove_extra_whitespaces=false", "--split_digits=true",
        "--pad_id=0", "--eos_id=1", "--bos_id=2", "--unk_id=3",
        "--user_defined_symbols=<loc0012>,<seg003>", "--character_coverage=0.98",
    ],
    # The same kind with at most 512 pieces, the vocabulary of the tiny test checkpoints.
    "bpe_tiny": [
        "--model_type=bpe", "--vocab_size=400", "--byte_fallback=true", "--normalization_rule_name=identity",
        "--add_dummy_prefix=false", "--remove_extra_whitespaces=false", "--split_digits=true",
        "--pad_id=0", "--eos_id=1", "--bos_id=2", "--unk_id=3", "--character_coverage=0.98",
    ],
    # Closer to Gemma's trainer spec: whitespace-only pieces and whitespace-run user symbols.
    "bpe_gemma_like": [
        "--model_type=bpe", "--vocab_size=600", "--byte_fallback=true", "--normalization_rule_name=identity",
        "--add_dummy_prefix=false", "--remove_extra_whitespaces=false", "--split_digits=true",
        "--allow_whitespace_only_pieces=true", "--pad_id=0", "--eos_id=1", "--bos_id=2", "--unk_id=3",
        "--user_defined_symbols=<start_of_turn>,<end_of_turn>,<loc0012>,▁▁,▁▁▁▁",
        "--character_coverage=0.98",
    ],
    # Default spm_train normalisation (nmt_nfkc with its precompiled charsmap), unknown pieces merged.
    "bpe_nfkc": ["--model_type=bpe", "--vocab_size=500", "--character_coverage=0.99"],
    "unigram_nfkc": ["--model_type=unigram", "--vocab_size=200", "--character_coverage=0.99", "--hard_vocab_limit=false",
                     "--user_defined_symbols=<loc0012>"],
    "unigram_bytefallback": [
        "--model_type=unigram", "--vocab_size=450", "--byte_fallback=true", "--hard_vocab_limit=false",
        "--normalization_rule_name=identity", "--add_dummy_prefix=false", "--remove_extra_whitespaces=false",
        "--pad_id=0", "--eos_id=1", "--bos_id=2", "--unk_id=3", "--character_coverage=0.98",
    ],
}


def main():
    rng = random.Random(20261129)
    corpus = "/tmp/tt_model_spm_corpus.txt"  # fixed: spm_train records the path in the model
    with open(corpus, "w", encoding="utf-8") as f:
        for line in corpus_lines(rng):
            f.write(line + "\n")
    tests = test_strings(random.Random(7))
    for name, flags in MODELS.items():
        subprocess.run(["spm_train", f"--input={corpus}", f"--model_prefix={name}", "--num_threads=1",
                        "--minloglevel=2", *flags], check=True)
        sp = spm.SentencePieceProcessor(model_file=f"{name}.model")
        with open(f"golden_{name}.jsonl", "w", encoding="utf-8") as out:
            for s in tests:
                out.write(json.dumps({"text": s, "ids": sp.encode(s)}, ensure_ascii=False) + "\n")
        subprocess.run(["rm", "-f", f"{name}.vocab"], check=True)
    subprocess.run(["rm", "-f", corpus], check=True)


if __name__ == "__main__":
    main()
