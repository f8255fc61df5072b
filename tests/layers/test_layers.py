"""The layout rules of issue 16: one-way layers (import-linter, `.importlinter`),
and files small enough to read.

`make lint` runs the contracts on the sources; these tests show that the
contracts do catch an upward import and a loop (a check that cannot fail is
no check), check the one thing the contracts set aside (names taken from the
root package), and hold the file sizes.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "nncodecs"
CONFIG = ROOT / ".importlinter"
# Modules above the library's layers: they may take public names from `nncodecs`.
FRONT_ENDS = ("cli", "__main__", "integrations", "datasets")

MAX_PYTHON_LINES = 400
MAX_CPP_LINES = 500


def _lint_imports(src: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed (make test installs it)")
    return subprocess.run(
        [exe, "--no-cache", "--no-logo", str(CONFIG)],
        cwd=src.parent, env={"PYTHONPATH": str(src.parent), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _copy_sources(tmp_path: Path) -> Path:
    dst = tmp_path / "src" / "nncodecs"
    shutil.copytree(SRC, dst, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    return dst


def test_the_sources_keep_the_contracts():
    result = _lint_imports(SRC)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # frame is under the codecs: importing one is upward
        ("frame/__init__.py", "import nncodecs.codecs.weights", "Every import runs downward"),
        # the container reaches the GPU only through the codecs
        ("container/layout.py", "import nncodecs.gpu", "only through the codecs"),
        # the store is under the container: it never imports the model
        ("store/files.py", "import nncodecs.container.layout", "Every import runs downward"),
        # a loop between two codec modules
        ("codecs/rans.py", "import nncodecs.codecs.huffman", "No import loops"),
        # above the container, only its public names: not its modules, nor the store
        ("formats/merge.py", "import nncodecs.container.layout", "only its public names"),
        ("cli/info.py", "from nncodecs.container.reader import Reader", "only its public names"),
        ("integrations/torch.py", "import nncodecs.store.files", "only its public names"),
    ],
)
def test_the_contracts_catch_a_bad_import(tmp_path, module, line, broken):
    src = _copy_sources(tmp_path)
    if broken == "No import loops":
        (src / "codecs/huffman.py").write_text(
            "import nncodecs.codecs.rans\n" + (src / "codecs/huffman.py").read_text()
        )
    target = src / module
    target.write_text(line + "\n" + target.read_text())
    result = _lint_imports(src)
    assert result.returncode != 0
    assert broken in result.stdout.split("Broken contracts")[-1]


def test_the_container_is_built_by_composition_and_stays_a_quarter_of_the_package():
    """No class of the container inherits from another of nncodecs' (a Writer holds
    its delta writer, a Reader its delta reader: no mixins reaching into their
    host's state); and the model stays at most a quarter of the package's lines
    (nncodecs' own Zarr reading and writing lives in store/)."""
    own = {p.stem for p in SRC.rglob("*.py")}
    for path in (SRC / "container").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                assert all(b in ("NamedTuple", "Exception") for b in bases), (path, bases)
                assert not any(b.split(".")[0] in own for b in bases), (path, bases)
    lines = {p: len(p.read_text().splitlines()) for p in SRC.rglob("*.py")}
    container = sum(n for p, n in lines.items() if (SRC / "container") in p.parents)
    assert container <= sum(lines.values()) / 4, (container, sum(lines.values()))


def test_the_container_face_lists_every_private_module():
    """The forbidden contract names every module of the container but its public ones
    (a new module is private until it is added to the face, and to the contract)."""
    section = CONFIG.read_text().split("[importlinter:contract:container-face]")[1]
    listed = section.split("forbidden_modules =")[1].split("\n#")[0].split()
    public = {"__init__", "tasks", "series", "task_zip"}
    modules = {p.stem for p in (SRC / "container").glob("*.py")} - public
    assert {f"nncodecs.container.{m}" for m in modules} | {"nncodecs.store"} == set(listed)


def _from_root_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    return [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "nncodecs" and node.level == 0
        for alias in node.names
    ]


def test_below_the_front_ends_only_core_comes_from_the_root_package():
    # The contracts set imports of the root package aside (grimp reads
    # `from nncodecs import _core` as one, and the root imports everything):
    # a public name taken that way would hide an upward import.
    bad = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC)
        if rel.parts[0].removesuffix(".py") in FRONT_ENDS or rel.name == "__init__.py" == str(rel):
            continue
        names = [n for n in _from_root_imports(path) if n != "_core"]
        if names:
            bad[str(rel)] = names
    assert not bad, f"take these from their own module, not the root package: {bad}"


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_python_file_in_src_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): _lines(p) for p in (ROOT / "src").rglob("*.py")}
    assert {p: n for p, n in long.items() if n > MAX_PYTHON_LINES} == {}


def test_formatting_is_skipped_in_src_only_with_a_reason():
    """Ruff's skip-formatting comments only where formatting would hurt reading, each
    with its reason: a skip followed by it as a comment of its own, an off region
    preceded by a comment line (ruff reads nothing after ``fmt: off``); never to keep
    a file under its size limit (src/ had 124 bare skips; the files they squeezed
    were split by job)."""
    bare = []
    for p in (ROOT / "src").rglob("*.py"):
        lines = p.read_text().splitlines()
        for i, line in enumerate(lines):
            skip = re.search(r"#\s*fmt:\s*skip\s*$", line)
            off = line.strip() == "# fmt: off" and not lines[i - 1].strip().startswith("# ")
            if skip or off:
                bare.append(f"{p.relative_to(ROOT)}:{i + 1}")
    assert bare == []


def test_no_cpp_file_is_over_500_lines():
    files = [
        p
        for base in (ROOT / "cpp", SRC / "gpu" / "kernels")
        for p in base.rglob("*")
        if p.suffix in {".cpp", ".h", ".cu", ".cuh"}
    ]
    assert files
    long = {str(p.relative_to(ROOT)): _lines(p) for p in files}
    assert {p: n for p, n in long.items() if n > MAX_CPP_LINES} == {}


def test_lazy_names_stay_what_they_name_after_every_submodule_is_imported():
    # A submodule named like an exported function would shadow it once imported.
    import importlib
    import pkgutil
    import types

    import nncodecs
    import nncodecs.codecs
    import nncodecs.container
    import nncodecs.formats

    for package in (nncodecs, nncodecs.codecs, nncodecs.container, nncodecs.formats):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if ".gpu.kernels" not in info.name and not info.name.endswith("__main__"):
                importlib.import_module(info.name)
        for name in package.__all__:
            assert not isinstance(getattr(package, name), types.ModuleType), (package, name)


def test_the_command_line_starts_without_the_codecs():
    # `nncodecs --help` imports the parser only: no zarr, no ml_dtypes, no _core.
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "nncodecs", "--help"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines()}
    assert "nncodecs.cli.parser" in imported
    assert not imported & {"zarr", "ml_dtypes", "nncodecs._core", "nncodecs.container"}


def _imported_by(code: str) -> tuple[set[str], str]:
    """The modules a fresh interpreter imports to run ``code``, and its stdout."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return {line.split("|")[-1].strip() for line in result.stderr.splitlines()}, result.stdout


def test_import_zarr_loads_only_the_data_types():
    # zarr 3.1 runs nncodecs' start-up hook once imported (zarr >= 3.2 loads the
    # data types on its first lookup instead): the data type classes, and the
    # two package __init__s above them, are all it may cost. Not the codecs,
    # the container, the C++ core or ml_dtypes (a second to import by itself).
    imported, out = _imported_by(
        "import zarr\n"
        "from zarr.core.dtype import data_type_registry as r\n"
        "print(zarr.__version__, 'bfloat16' in r.contents)"
    )
    ours = {m for m in imported if m.partition(".")[0] == "nncodecs"}
    package = {"nncodecs", "nncodecs._lazy", "nncodecs._zipfile_fix"}
    assert ours <= package | {"nncodecs.codecs", "nncodecs.codecs.zarr_dtypes"}
    assert "ml_dtypes" not in imported
    version, registered = out.split()
    if tuple(int(p) for p in version.split(".")[:2]) < (3, 2):
        assert registered == "True", "the zarr 3.1 start-up hook did not register the data types"


def test_the_command_caps_openblas_threads_before_numpy_loads():
    # OpenBLAS's threads spin after NumPy's import, taking CPU from the codec's threads:
    # the command sets OPENBLAS_NUM_THREADS in main(), which only works while nothing
    # before it (the package, the parser) has imported NumPy. A user's own setting stays.
    code = (
        "import os, sys\n"
        "os.environ.pop('OPENBLAS_NUM_THREADS', None)\n"
        "from nncodecs.cli import main\n"
        "from nncodecs.cli.parser import build_parser\n"
        "build_parser()\n"
        "assert 'numpy' not in sys.modules, 'the parser imported NumPy'\n"
        "print(main(['info', 'no-such-container']), os.environ['OPENBLAS_NUM_THREADS'])\n"
    )
    _, out = _imported_by(code)
    assert out.split() == ["1", "1"]
    result = subprocess.run(
        [sys.executable, "-c", code.replace("os.environ.pop('OPENBLAS_NUM_THREADS', None)",
                                            "os.environ['OPENBLAS_NUM_THREADS'] = '3'")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.stdout.split() == ["1", "3"], result.stderr


def test_no_module_reads_another_objects_private_state_without_a_reason():
    # ruff's SLF001 runs over src/ (pyproject.toml); each exception says why, on its line
    # or in the comment above it (another package's object with no public way in)
    bare = []
    for path in (ROOT / "src").rglob("*.py"):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if "noqa: SLF001" in line:
                reason = "(" in line.split("noqa: SLF001", 1)[1]
                above = i > 0 and lines[i - 1].strip().startswith("#")
                if not (reason or above):
                    bare.append(f"{path.relative_to(ROOT)}:{i + 1}")
    assert bare == []
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"SLF"' in pyproject.split("[tool.ruff.lint]")[1].split("\n\n")[0]


def test_every_module_and_test_file_is_mapped():
    # tests/README.md says which tests test each source module: none left out
    # (the table of where the tests were before their move does not count)
    page = (ROOT / "tests" / "README.md").read_text().split("## Where the tests were before")[0]
    modules = {
        ".".join(p.relative_to(ROOT / "src").with_suffix("").parts).removesuffix(".__init__")
        for p in (ROOT / "src" / "nncodecs").rglob("*.py")
    }
    missing = sorted(m for m in modules if f"`{m}`" not in page)
    tests = sorted(
        p.relative_to(ROOT / "tests").as_posix() for p in (ROOT / "tests").rglob("test_*.py")
    )
    unnamed = [t for t in tests if f"`{t}`" not in page]
    assert (missing, unnamed) == ([], [])
    # each in the folder of its layer or of its cross-cutting suite, none left at the top
    assert not [t for t in tests if "/" not in t]
