"""`ReadByRegions`: any engine made to read a page as the bands and cells `page_regions` cuts it into."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

from PIL import Image

from ocr_app.config import PixelBudget, RegionSplit
from ocr_app.engines.protocol import Engine, GenerationSettings, Key, PageText, TextCallback, WrappedEngine
from ocr_app.metrics import PageMetrics, SpecDecodingStats
from ocr_app.regions.page import page_regions
from ocr_app.regions.text import band_separator, cell_text, joined_text, table_row
from ocr_app.repetition import is_degenerate


# Where a part's reading ended with its stop token, which a reading's ids leave out: in a page's joined ids it
# stands as PART_END (no token id is negative), with the stop token's top-2 gap, so that two readings that end a
# part at different places differ right there, and `ocr-eval` shows the gap of the decision that differed.
PART_END = -1


def _ids_with_part_end(reading: PageText) -> tuple[int, ...]:
    """A reading's ids, then PART_END if it stopped by itself (a joined reading already ends with its own)."""
    ids = reading.token_ids
    ended = reading.metrics.finish_reason == "stop" and not (ids and ids[-1] == PART_END)
    return (*ids, PART_END) if ended else ids


def merged(readings: list[PageText], text: str, wall_s: float) -> PageText:
    """One reading of the `readings` of a page's parts, in order, whose joined text is `text`."""
    specs = [reading.metrics.spec for reading in readings if reading.metrics.spec is not None]
    spec = None
    if specs:
        spec = SpecDecodingStats()
        for reading_spec in specs:
            spec.merge(reading_spec)
    metrics = PageMetrics(
        prompt_tokens=sum(reading.metrics.prompt_tokens for reading in readings),
        output_tokens=sum(reading.metrics.output_tokens for reading in readings),
        wall_s=wall_s,
        finish_reason="length" if any(r.metrics.finish_reason == "length" for r in readings) else "stop",
        drafts=readings[0].metrics.drafts,
        spec=spec,
        retried=any(reading.metrics.retried for reading in readings),
        part_looped=any(is_degenerate(reading) for reading in readings),
    )
    ids = [_ids_with_part_end(reading) for reading in readings]
    gaps = None
    if all(reading.top2_gaps is not None for reading in readings):
        # A reading's gaps run past its token ids by its stop token's, which PART_END stands for.
        gaps = tuple(gap for reading, part_ids in zip(readings, ids) for gap in reading.top2_gaps[: len(part_ids)])
    return PageText(text=text, token_ids=tuple(token for part_ids in ids for token in part_ids), metrics=metrics, top2_gaps=gaps)


def join_band(parts: list[PageText | None], is_table_row: bool) -> PageText:
    """A band from its parts' readings, left to right: a table's row from its cells' (None: an empty cell,
    not read), a line from its chunks', joined by spaces."""
    read = [part for part in parts if part is not None]
    if len(parts) == 1:
        return read[0]
    if is_table_row:
        text = table_row(["" if cell is None else cell_text(cell.text) for cell in parts])
    else:
        text = " ".join(chunk.text.strip() for chunk in read)
    return merged(read, text, sum(part.metrics.wall_s for part in read))


def join_regions(regions: list[PageText], wall_s: float) -> PageText:
    """One page from its bands' readings, in order; `wall_s` is the page's, from its first band to its last."""
    return merged(regions, joined_text([region.text for region in regions]), wall_s)


class _SeparatedStream:
    """Passes a band's streamed text on, preceded by its separator from the bands before (none for the first
    band), which depends on how the band's text starts: it is sent with the band's first text."""

    def __init__(self, on_text: TextCallback, previous: list[str]):
        self.on_text = on_text
        self.previous = previous
        self.separated = not previous

    def __call__(self, chunk: str) -> None:
        if not chunk:
            return
        if not self.separated:
            self.on_text(band_separator(self.previous, chunk))
            self.separated = True
        self.on_text(chunk)

    def finish(self) -> None:
        """After the band is read: the separator of a band read as nothing."""
        if not self.separated:
            self.on_text(band_separator(self.previous, ""))


class ReadByRegions(WrappedEngine):
    """Wraps any engine: each page is read as the bands and cells `page_regions` cuts it into."""

    def __init__(self, engine: Engine, split: RegionSplit, budget: PixelBudget):
        super().__init__(engine)
        self.split = split
        self.budget = budget

    def read(self, image: Image.Image, settings: GenerationSettings, on_text: TextCallback | None = None) -> PageText:
        started = time.perf_counter()
        regions: list[PageText] = []
        for band in page_regions(image, self.split, self.budget):
            streamed = _SeparatedStream(on_text, [region.text for region in regions]) if on_text is not None else None
            if len(band.images) == 1:
                regions.append(self.engine.read(band.images[0], settings, streamed))
            else:  # a table's row or a line in chunks: streamed whole once its parts are read, as its text is theirs joined
                readings = [None if part is None else self.engine.read(part, settings) for part in band.images]
                regions.append(join_band(readings, band.is_table_row))
                if streamed is not None:
                    streamed(regions[-1].text)
            if streamed is not None:
                streamed.finish()
        return join_regions(regions, time.perf_counter() - started)

    def read_many(
        self, pages: Iterable[tuple[Key, Image.Image]], settings: GenerationSettings, concurrency: int
    ) -> Iterator[tuple[Key, PageText]]:
        """Every cell or chunk of every band of every page in flight, up to `concurrency` at once; a page comes
        back when its last is read."""
        readings: dict[Key, list[list[PageText | None]]] = {}
        table_rows: dict[Key, list[bool]] = {}
        unread: dict[Key, int] = {}
        started: dict[Key, float] = {}

        def parts() -> Iterator[tuple[tuple[Key, int, int], Image.Image]]:
            for key, image in pages:
                bands = page_regions(image, self.split, self.budget)
                readings[key] = [[None] * len(band.images) for band in bands]
                table_rows[key] = [band.is_table_row for band in bands]
                unread[key] = sum(part is not None for band in bands for part in band.images)
                started[key] = time.perf_counter()
                for band_index, band in enumerate(bands):
                    for part_index, part in enumerate(band.images):
                        if part is not None:
                            yield (key, band_index, part_index), part

        for (key, band_index, part_index), region in self.engine.read_many(parts(), settings, concurrency):
            readings[key][band_index][part_index] = region
            unread[key] -= 1
            if not unread[key]:
                del unread[key]
                bands = [join_band(band, is_row) for band, is_row in zip(readings.pop(key), table_rows.pop(key))]
                yield key, join_regions(bands, time.perf_counter() - started.pop(key))
