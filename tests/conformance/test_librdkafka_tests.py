"""``conformance.librdkafka_tests`` reads librdkafka's ``test-runner`` output right: the excerpts
are test-runner's own lines (colours removed) from runs against kcompat and a misconfigured broker.
The whole run (building librdkafka, about 15 minutes) is not part of the suite."""

from __future__ import annotations

from pathlib import Path

from conformance.librdkafka_tests import broker_tests, classify

PASSED = """\
[0001_multiobj               /  1.072s] ================= Test 0001_multiobj PASSED =================
[<MAIN>                      /  2.001s] ALL-TESTS: duration 2000.644ms
"""

SUBTESTS = """\
[0045_subscribe_update       / 40.1s] ================= Test 0045_subscribe_update PASSED =================
[0045_subscribe_many_updates / 60.3s] ================= Test 0045_subscribe_many_updates PASSED =================
"""

FAILED = """\
[0081_admin                  / 13.522s] TEST FAILURE
### Test "0081_admin (do_test_CreateAcls:1539)" failed at 0081-admin.c:1622:do_test_CreateAcls() at Fri Nov 27 22:41:32 2026: ###
Test assertion failed: "!error": Expected RD_KAFKA_RESP_ERR_NO_ERROR, not No Authorizer is configured.
[<MAIN>                      / 14.612s] TEST FAILURE
### Test "<MAIN>" failed at test.c:1946:test_wait_exit() at Fri Nov 27 22:41:34 2026: ###
3 thread(s) still active in librdkafka
"""

LIBRDKAFKA_TIMEOUT = """\
[0112_assign_unknown_part    /240.022s] TEST FAILURE
### Test "0112_assign_unknown_part" failed at test.c:1558:check_test_timeouts() at Fri Nov 27 22:31:28 2026: ###
Test 0112_assign_unknown_part timed out (timeout set to 240 seconds)
"""

SKIPPED = """\
[0092_mixed_msgver           /  0.000s] WARN: SKIPPING TEST: MsgVersion 1 was removed in Apache Kafka 4.0
[0092_mixed_msgver           /  0.000s] ================= Test 0092_mixed_msgver SKIPPED =================
"""

LOCAL_ONLY = """\
[<MAIN>                      /  0.000s] Tests to run     : 0004
[<MAIN>                      /  0.001s] ALL-TESTS: duration 1.2ms
"""


def test_outcomes_of_test_runner_output():
    assert classify("0001", PASSED, False, 2.0).status == "PASSED"
    assert classify("0045", SUBTESTS, False, 60.0).status == "PASSED"
    failed = classify("0081", FAILED, False, 14.0)
    assert failed.status == "FAILED"
    assert failed.reason == ('0081_admin (do_test_CreateAcls:1539): Test assertion failed: "!error": '
                             'Expected RD_KAFKA_RESP_ERR_NO_ERROR, not No Authorizer is configured.')
    assert classify("0112", LIBRDKAFKA_TIMEOUT, False, 240.0).status == "TIMEOUT"
    skipped = classify("0092", SKIPPED, False, 0.0)
    assert (skipped.status, skipped.reason) == ("SKIPPED", "MsgVersion 1 was removed in Apache Kafka 4.0")
    assert classify("0004", LOCAL_ONLY, False, 0.0).status == "NONE"


def test_a_run_cut_by_the_runner_is_a_timeout_even_after_a_passed_subtest():
    cut = classify("0045", SUBTESTS.splitlines()[0] + "\n", True, 900.0)
    assert (cut.status, cut.reason) == ("TIMEOUT", "cut after the runner's timeout")


def test_broker_tests_are_the_0nnn_sources(tmp_path: Path):
    tests = tmp_path / "tests"
    tests.mkdir()
    for name in ("0001-multiobj.c", "0045-subscribe_update.c", "0078-c_from_cpp.cpp", "1000-unktopic.c",
                 "8001-fetch_from_follower_mock_manual.c", "test.c", "0045-subscribe_update.o"):
        (tests / name).write_text("")
    assert broker_tests(tmp_path) == ["0001", "0045", "0078"]
