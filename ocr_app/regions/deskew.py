"""Deskew: a scan turned by a degree or two is turned level before it is cut into bands."""

from __future__ import annotations

import numpy as np
from jdeskew.estimator import get_angle
from PIL import Image

from ocr_app.regions.ink import ink_mask, paper_color

# Skew is sought up to this many degrees either way (scans are turned by a few); a page turned by less than
# MIN_SKEW is left as it is: its lines drift by under 3 px across an 880-px page, and turning blurs a little.
MAX_SKEW = 5.0
MIN_SKEW = 0.2
# jdeskew's estimate is refined over this many degrees either way, in steps of SKEW_STEP (at 0.02, an 880-px
# line's ends are a third of a pixel off level).
SKEW_REFINE = 0.3
SKEW_STEP = 0.02


def skew_angle(image: Image.Image) -> float:
    """Degrees to turn `image` by (counter-clockwise) to level its lines: jdeskew's estimate (a radial
    projection of the page's spectrum, whose strongest direction is the lines'; off by up to 0.2 degrees
    on samples/tob-mini's pages), refined to the angle within `SKEW_REFINE` of it at which the ink's rows
    are sharpest (the variance of ink per row peaks when every line fills its own rows)."""
    gray = np.asarray(image.convert("L"))  # [H, W] uint8
    inked = ink_mask(image)  # [H, W]
    if not inked.any():
        return 0.0
    coarse = get_angle(gray, angle_max=MAX_SKEW)
    ink = Image.fromarray(inked.astype(np.uint8) * 255)

    def row_sharpness(angle: float) -> float:
        turned = np.asarray(ink.rotate(angle, resample=Image.Resampling.BILINEAR), dtype=np.float32)  # [H, W]
        return float(np.var(turned.sum(axis=1)))

    return max(coarse + np.arange(-SKEW_REFINE, SKEW_REFINE + SKEW_STEP / 2, SKEW_STEP), key=row_sharpness)


def level_angle(image: Image.Image) -> float:
    """`skew_angle` when `image`'s lines are skewed by MIN_SKEW to MAX_SKEW degrees, else 0 (left as it is)."""
    angle = skew_angle(image)
    return angle if MIN_SKEW <= abs(angle) <= MAX_SKEW else 0.0


def turned(image: Image.Image, angle: float) -> Image.Image:
    """`image` turned by `angle` degrees (counter-clockwise), grown to keep its corners, the new ones in the
    paper's colour."""
    if angle == 0.0:
        return image
    return image.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=paper_color(image))


def deskewed(image: Image.Image) -> Image.Image:
    """`image` turned so that its lines run level (`level_angle`)."""
    return turned(image, level_angle(image))
