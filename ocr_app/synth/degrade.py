"""Scan-like damage for rendered pages: slight rotation, blur, sensor noise, JPEG artefacts.

Each level is a recipe of ranges; the values are drawn from the sample's rng,
so a seed gives the same damage every time.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageFilter


@dataclass(frozen=True)
class Damage:
    max_rotation_deg: float
    blur_radius: tuple[float, float]
    noise_sigma: tuple[float, float]
    jpeg_quality: tuple[int, int] | None


DEGRADATIONS: dict[str, Damage] = {
    "clean": Damage(0.0, (0.0, 0.0), (0.0, 0.0), None),
    "light": Damage(0.5, (0.0, 0.5), (0.0, 4.0), (75, 90)),
    "scan": Damage(1.2, (0.3, 0.8), (3.0, 8.0), (50, 80)),
    "heavy": Damage(2.5, (0.6, 1.2), (6.0, 14.0), (30, 55)),
}


def degrade(image: Image.Image, level: str, rng: random.Random, turn: bool = True) -> Image.Image:
    """`image` (RGB) with the damage of `level` (one of DEGRADATIONS) applied; `turn=False` leaves out the
    rotation (and draws no angle)."""
    damage = DEGRADATIONS[level]
    if damage.max_rotation_deg and turn:
        angle = rng.uniform(-damage.max_rotation_deg, damage.max_rotation_deg)
        paper = image.getpixel((0, 0))
        image = image.rotate(angle, resample=Image.Resampling.BICUBIC, expand=False, fillcolor=paper)
    radius = rng.uniform(*damage.blur_radius)
    if radius > 0.05:
        image = image.filter(ImageFilter.GaussianBlur(radius))
    sigma = rng.uniform(*damage.noise_sigma)
    if sigma > 0:
        noise = np.random.default_rng(rng.getrandbits(64)).normal(0.0, sigma, size=(image.height, image.width, 1))
        pixels = np.asarray(image, dtype=np.float32) + noise  # [H, W, 3], one grain for all channels
        image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), mode="RGB")
    if damage.jpeg_quality is not None:
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=rng.randint(*damage.jpeg_quality))
        buffer.seek(0)
        image = Image.open(buffer).convert("RGB")
    return image
