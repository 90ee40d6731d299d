"""The batches `harness scale` measures: a list given by the user, or `auto`, a
geometric series that stops before the footprint passes a byte cap."""

from harness.choices import ChoiceError
from harness.scale.fit import FitError, fit_line

AUTO = "auto"
AUTO_START = (1, 2)  # measured first, whatever the cap: a line needs two points
AUTO_MAX_POINTS = 12  # 1, 2, 4, ... 2048 at most
AUTO_GROWTH = 2


def parse_batches(text):
    """'1,2,4,8' -> [1, 2, 4, 8]; 'auto' -> AUTO. ChoiceError (naming what is valid)
    for a batch that is not a positive int, a repeated one, or fewer than two."""
    text = str(text).strip()
    if text == AUTO:
        return AUTO
    items = [item.strip() for item in text.split(",") if item.strip()]
    batches = []
    for item in items:
        try:
            batch = int(item)
        except ValueError:
            raise ChoiceError(f"--batch {text!r}: {item!r} is not an integer; give positive integers "
                              "like 1,2,4,8, or auto") from None
        if batch < 1:
            raise ChoiceError(f"--batch {text!r}: a batch must be at least 1, got {batch}")
        if batch in batches:
            raise ChoiceError(f"--batch {text!r}: batch {batch} is given twice")
        batches.append(batch)
    if len(batches) < 2:
        raise ChoiceError(f"--batch {text!r}: a line needs 2 or more batches (e.g. 1,2,4,8), or auto")
    return sorted(batches)


def next_auto_batch(measured, cap):
    """The next batch of an auto series, or None when it is complete.

    `measured` maps each batch measured so far to its footprint in bytes (None when its
    pass failed: the series stops there). After AUTO_START, the batch doubles while the
    line through the points so far predicts a footprint within `cap` for it."""
    if any(v is None for v in measured.values()):
        return None
    for batch in AUTO_START:
        if batch not in measured:
            return batch
    if len(measured) >= AUTO_MAX_POINTS:
        return None
    last = max(measured)
    if measured[last] > cap:
        return None
    candidate = last * AUTO_GROWTH
    try:
        predicted = fit_line(measured.items()).at(candidate)
    except FitError:
        return None
    return candidate if predicted <= cap else None
