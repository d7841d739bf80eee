"""The connector setup of ``spark_it.session``: coordinates derived from the installed pyspark (and
equal to the project's pin), the jar actually loaded at that version, and the persistent Ivy cache."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pyspark

from spark_it.session import connector_coordinates, ivy_cache_dir

ROOT = Path(__file__).resolve().parents[2]


def test_coordinates_follow_installed_pyspark():
    assert connector_coordinates() == f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
    assert connector_coordinates("4.1.3") == "org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.3"


def test_installed_pyspark_is_the_pinned_one():
    test_deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    pins = [m.group(1) for d in test_deps if (m := re.fullmatch(r"pyspark==([\w.]+)", d.split(";")[0].strip()))]
    assert pins == [pyspark.__version__]


def test_session_loads_the_connector_at_that_version(spark):
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.jars.packages") == connector_coordinates()
    assert conf.get("spark.jars.ivy") == str(ivy_cache_dir())
    assert spark.version == pyspark.__version__
    jars = str(spark.sparkContext._jsc.sc().listJars())
    assert f"spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar" in jars
    assert re.search(r"kafka-clients-[\d.]+\.jar", jars)
    # the Ivy cache keeps the resolved jars for the next run
    assert (ivy_cache_dir() / "jars" / f"org.apache.spark_spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar").is_file()


def test_ivy_cache_location(monkeypatch, tmp_path):
    monkeypatch.delenv("KCOMPAT_SPARK_IVY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert ivy_cache_dir() == tmp_path / ".cache" / "kcompat-spark-ivy" and ivy_cache_dir().is_dir()
    monkeypatch.setenv("KCOMPAT_SPARK_IVY", str(tmp_path / "elsewhere"))
    assert ivy_cache_dir() == tmp_path / "elsewhere" and ivy_cache_dir().is_dir()
