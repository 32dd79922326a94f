"""Self-distillation of the MTP head: the frozen main model reads pages, the head learns to draft its outputs.

    config.py     TrainConfig, defaults from configs/train_mtp.toml
    data.py       page sources (documents folder, synthetic pages), the read cache, the held-out split
    teacher.py    the frozen main model's teacher-forced pass over prompt + its own output
    distill.py    K chained draft steps of the head in one parallel pass, the KL loss, acceptance counts
    head_init.py  start points: the checkpoint's head, another head file, or fresh
    loop.py       AdamW + warmup/cosine, accumulation, clipping, resumable checkpoints
    export.py     the new model folder: mtp.safetensors + index, every other file copied unchanged
    evaluate.py   teacher-forced and real (speculative decoder) acceptance, before and after
    run.py        a whole run as library calls (the CLI `ocr-train-mtp` is a shell over it)
"""
