"""One colour rule on the site's front page and on each comparison page: the lowest
exact step peak of each row is green on both, and nothing else is coloured by its
figure (harness/report/lowest.py)."""

import pathlib
import re

from harness.site import comparisons

ROOT = pathlib.Path(__file__).resolve().parents[2]


def marks(table, row_head):
    """{(workload, column)} of the cells marked lowest in one HTML table."""
    head, body = table.split("</thead>")
    columns = re.findall(r"<th>([^<]*)</th>", head)[1:]
    found = set()
    for workload, row in re.findall(row_head + r"([^<]*)</th>(.*?)</tr>", body):
        cells = re.findall(r'<td class="([^"]*)"', row)
        found |= {(workload, column) for column, cls in zip(columns, cells) if "lowest" in cls.split()}
    return found


def test_the_front_page_marks_what_each_comparison_page_marks(site):
    front = (site / "index.html").read_text()
    compared = 0
    for record_set in comparisons.find(str(ROOT)):
        shown = marks(front[front.index(f'id="{record_set.name}"'):].split("</table>")[0], "<tr><th>")
        page = (site / record_set.folder / "index.html").read_text()
        # the headline is the eager float32 view without an optimizer (named by the machine
        # its cells were timed on where the set's views were timed on more than one)
        view = re.search(rf"{record_set.size} · float32 · {record_set.device} · eager( · timed on [^<]*)?</h2>", page)
        grid = page[view.end():].split("</table>")[0]
        assert shown, record_set.name  # every committed set has rows with two exact figures
        assert shown == marks(grid, '<tr><th class="workload">'), record_set.name
        compared += 1
    assert compared >= 3  # CPU small, CUDA small, CUDA paper


def test_no_cell_is_coloured_by_its_own_figure(site):
    for path in [site / "index.html", *sorted(site.glob("comparison/*/index.html"))]:
        page = path.read_text()
        assert "hsl(" not in page and not re.search(r'<td[^>]*style="background', page), path
        assert 'class="num best"' not in page and ".lowest { background" in page, path
