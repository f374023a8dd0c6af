"""Fewer Py4J round trips to build a DataFrame (issue 12): the only code that touches PySpark's
Py4J internals.

Building a batch's plan is a few thousand Py4J calls, each a round trip to the JVM (a 1k x 1k
batch: 2,983 on the driver's thread). About half of them are PySpark asking the same things
again:

- every Column function (``F.col``, ``F.when``, a column name made a Column) looks its JVM
  function up anew: ``sc._jvm.functions`` asks the JVM what ``functions`` is, then whether the
  name is one of its methods, two round trips before the call itself (744 a batch);
- every list of columns (a ``select``, a ``groupBy``, a function's arguments) is made a Scala
  ``Seq`` by looking ``PythonUtils`` and its ``toSeq`` up, then building a ``java.util.ArrayList``
  with one round trip per element (780 a batch);
- a Column operator made of a function (``~c`` is ``not``, ``-c`` is ``negate``) asks
  ``sc._jvm.functions`` anew as well. The JVM finds a bare ``functions`` by trying each package
  PySpark imported, and each miss is a failed class lookup that reads every jar's entries.

The package's own JVM calls name their classes in full (``jvm_class``, ``static``) rather than
walking ``jvm.org.apache...``, whose every package step is such a failed lookup.

``install`` makes PySpark ask for a static method once per gateway and name, and keep the
answer (a Py4J ``JavaMember``: a method's name and class, bound to no object); and makes a list
of up to ten elements with one call (``java.util.List.of``), longer ones from such pieces.
Only static methods are kept (a field's value, or anything else, is looked up every time as
before); a list holding a None, or longer than ``LONGEST``, is converted by Py4J as before.
Keyed weakly by the gateway's client: a new session (tests) asks again. ``get_spark`` calls
``install``; it is idempotent.
"""
from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from py4j.java_gateway import JavaClass, JavaMember
from pyspark.sql.classic import column as _column_module
from pyspark.sql.classic import dataframe as _dataframe_module
from pyspark.sql.column import Column as ParentColumn
from pyspark.sql.functions import builtin as _builtin
from pyspark.sql.utils import enum_to_value, get_active_spark_context

# The modules whose functions ``install`` replaces (typed loosely: their names are private).
_column: Any = _column_module
_dataframe: Any = _dataframe_module

FUNCTIONS = "org.apache.spark.sql.functions"
PYTHON_UTILS = "org.apache.spark.api.python.PythonUtils"
LIST_OF = 10  # java.util.List.of's widest overload without varargs
LONGEST = 200  # longer lists go through Py4J's converter (nothing here builds one)

_members: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], JavaMember]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()
_original_lookup: Callable[[str, Any], Any] = _builtin._get_jvm_function
# PySpark's own functions that ``install`` replaces (``uninstall`` puts them back).
_PYSPARK_OWN = (
    _builtin._get_jvm_function,
    _column._create_column_from_name,
    _column._create_column_from_literal,
    _column._to_seq,
    _dataframe._to_seq,
    _column._func_op,
    _column._bin_func_op,
)


def static_method(client: Any, cls: str, name: str, lookup: Callable[[], Any] | None = None) -> Any:
    """The static method ``cls.name`` on the gateway of ``client``, asked of the JVM once per
    client (``lookup`` asks; by default ``getattr(JavaClass(cls), name)``)."""
    key = (cls, name)
    with _lock:
        known = _members.get(client)
        if known is not None and key in known:
            return known[key]
    found = lookup() if lookup is not None else getattr(JavaClass(cls, client), name)
    if isinstance(found, JavaMember):
        with _lock:
            _members.setdefault(client, {})[key] = found
    return found


def _client(sc: Any) -> Any:
    return sc._gateway._gateway_client


def function(name: str, sc: Any) -> Any:
    """``org.apache.spark.sql.functions.<name>``: PySpark's ``_get_jvm_function``, kept."""
    return static_method(_client(sc), FUNCTIONS, name, lambda: _original_lookup(name, sc))


def java_list(sc: Any, items: Iterable[Any]) -> Any:
    """``items`` as a ``java.util.List`` in one round trip per ten elements (and one to join
    the pieces); the Python list itself (Py4J converts it) when empty, holding a None or longer
    than ``LONGEST``."""
    values = list(items)
    if not values or len(values) > LONGEST or any(v is None for v in values):
        return values
    client = _client(sc)
    of = static_method(client, "java.util.List", "of")
    pieces = [of(*values[i : i + LIST_OF]) for i in range(0, len(values), LIST_OF)]
    if len(pieces) == 1:
        return pieces[0]
    joined = JavaClass("java.util.ArrayList", client)(pieces[0])
    for piece in pieces[1:]:
        joined.addAll(piece)
    return joined


def to_seq(sc: Any, cols: Iterable[Any], converter: Callable[[Any], Any] | None = None) -> Any:
    """PySpark's ``_to_seq`` (columns or names -> a Scala ``Seq``) with ``java_list``."""
    if converter:
        cols = [converter(c) for c in cols]
    return static_method(_client(sc), PYTHON_UTILS, "toSeq")(java_list(sc, cols))


def jvm_class(jvm: Any, fqn: str) -> Any:
    """The JVM class ``fqn`` as a Py4J ``JavaClass``, named without a round trip.
    ``jvm.a.b.C`` asks the JVM what ``a``, ``a.b`` and ``a.b.C`` are in turn, and each of the
    names that is not a class is a failed class lookup that reads every jar's entries on the
    class path (stop 62's profile: 7-10 % of the driver's Py4J thread samples)."""
    return JavaClass(fqn, jvm._gateway_client)


def static(jvm: Any, fqn: str, name: str) -> Any:
    """The static method ``fqn.name`` (``static_method``: asked of the JVM once per gateway)."""
    return static_method(jvm._gateway_client, fqn, name)


def _func_op(name: str, column: Any) -> Any:
    """PySpark's ``_func_op`` (``~c``, ``-c``), with the function kept (``function``): PySpark's
    asks ``sc._jvm.functions`` anew, a package search of failed class lookups each time."""
    return _column.Column(function(name, get_active_spark_context())(column._jc))


def _bin_func_op(name: str, column: Any, other: Any, reverse: bool = False) -> Any:
    """PySpark's ``_bin_func_op`` (``c ** x``), with the function kept."""
    fn = function(name, get_active_spark_context())
    jc = other._jc if isinstance(other, ParentColumn) else _column._create_column_from_literal(other)
    return _column.Column(fn(column._jc, jc) if not reverse else fn(jc, column._jc))


def _column_from_name(name: str) -> Any:
    return function("col", get_active_spark_context())(name)


def _column_from_literal(literal: Any) -> Any:
    return function("lit", get_active_spark_context())(enum_to_value(literal))


def install() -> None:
    """Route PySpark's function lookups and column lists through this module (per process)."""
    _builtin._get_jvm_function = function
    _column._create_column_from_name = _column_from_name
    _column._create_column_from_literal = _column_from_literal
    _column._to_seq = to_seq
    _dataframe._to_seq = to_seq
    _column._func_op = _func_op
    _column._bin_func_op = _bin_func_op


def uninstall() -> None:
    """PySpark's own functions back (``bench/build_bench.py`` compares both)."""
    (
        _builtin._get_jvm_function,
        _column._create_column_from_name,
        _column._create_column_from_literal,
        _column._to_seq,
        _dataframe._to_seq,
        _column._func_op,
        _column._bin_func_op,
    ) = _PYSPARK_OWN


@contextmanager
def sent_commands(sc: Any, thread: threading.Thread | None = None) -> Iterator[list[str]]:
    """Every Py4J command ``sc``'s gateway client sends inside the block, in order (a list that
    grows as they are sent; clear it to count afresh). ``thread``: only those sent from it (the
    driver's main thread, say: Py4J's finalizer thread frees objects at random times). For
    tests and benches counting round trips."""
    client = _client(sc)
    sent: list[str] = []
    send = client.send_command

    def counted(command: str, *args: Any, **kwargs: Any) -> Any:
        if thread is None or threading.current_thread() is thread:
            sent.append(command)
        return send(command, *args, **kwargs)

    client.send_command = counted
    try:
        yield sent
    finally:
        del client.send_command


def installed() -> bool:
    return _builtin._get_jvm_function is function and _dataframe._to_seq is to_seq


__all__ = ["FUNCTIONS", "LIST_OF", "LONGEST", "PYTHON_UTILS", "function", "install", "installed", "java_list", "jvm_class", "sent_commands", "static", "static_method", "to_seq", "uninstall"]
