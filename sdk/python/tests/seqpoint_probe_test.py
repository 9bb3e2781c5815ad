"""Tests of the seqpoint_probe module without a tracer (the eBPF tests in probes attach
real probes to it). Run by ctest as sdk_python_test with PYTHONPATH at the build tree."""

import os
import subprocess
import sys
import unittest

import seqpoint_probe


class SeqpointProbeTest(unittest.TestCase):
    def test_library_is_loaded_from_beside_the_module(self):
        self.assertTrue(seqpoint_probe.available())
        self.assertEqual(os.path.dirname(seqpoint_probe.library_path()),
                         os.path.dirname(seqpoint_probe.__file__))

    def test_context_manager_counts_iterations(self):
        with seqpoint_probe.iteration(seq_len=12, batch=4, tokens=40) as first:
            pass
        with seqpoint_probe.iteration(seq_len=7) as second:
            pass
        self.assertEqual(second.iter, first.iter + 1)
        with seqpoint_probe.iteration(seq_len=7, iter=1000) as explicit:
            self.assertEqual(explicit.iter, 1000)

    def test_end_fires_on_exception(self):
        with self.assertRaises(KeyError):
            with seqpoint_probe.iteration(seq_len=3):
                raise KeyError("boom")

    def test_bad_values_name_the_argument(self):
        with self.assertRaisesRegex(ValueError, "seq_len=-1"):
            seqpoint_probe.iteration(seq_len=-1)
        with self.assertRaisesRegex(ValueError, "batch=4294967296"):
            seqpoint_probe.iteration_begin(0, 1, batch=2**32)
        with self.assertRaisesRegex(TypeError, "seq_len must be an integer"):
            seqpoint_probe.iteration(seq_len="long")
        # SL 0 is passed through: the probe flags it, the job is not stopped.
        seqpoint_probe.iteration_begin(5, 0)
        seqpoint_probe.iteration_end(5)

    def test_missing_library_disables_markers_with_one_warning(self):
        env = dict(os.environ, SEQPOINT_USDT_LIB="/nonexistent/libseqpoint_usdt.so")
        code = ("import warnings; warnings.simplefilter('always');\n"
                "import seqpoint_probe as p\n"
                "assert not p.available()\n"
                "with p.iteration(seq_len=5): pass\n"
                "print('ok')\n")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=False)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("ok", out.stdout)
        self.assertIn("SEQPOINT_USDT_LIB", out.stderr)
        self.assertEqual(out.stderr.count("RuntimeWarning"), 1)


if __name__ == "__main__":
    unittest.main()
