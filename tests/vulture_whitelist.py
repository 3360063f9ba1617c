"""Names vulture cannot see used, each with the reason it stays (read by ``tests/test_dead_code.py``).

Vulture reads ``tuidiag/`` alone: what the package's users, its tests, Python, numpy or a
framework reach by name looks unused to it. This file names them (it is parsed, never run).
Textual's conventions (``on_*``, ``action_*``, ``compose``, ``BINDINGS`` ...) and the CLI's
``add_*_arguments`` (looked up by name in ``tuidiag.cli.main``) are ignored by pattern in
``pyproject.toml``'s ``[tool.vulture]``.
"""

# ruff: noqa
_ = object()

# The public API (README): what a training script or a notebook calls.
_.rejected_values  # Recorder.rejected_values: values refused at the call
_.to_pandas  # Run.to_pandas(): a run's metrics as a long DataFrame
__dir__  # tuidiag.__dir__: what dir() and tab completion list
_.log_text  # Recorder.log_text(key, text): a text event, as SummaryWriter.add_text
_.log_hparams  # Recorder.log_hparams(params, metrics): as TensorBoard's add_hparams
_.held_dropped  # TuidiagLogger.held_dropped: calls dropped while the callback's recorder was not open

# Lightning's Logger interface: called by the Trainer, by name.
_.save_dir
_.log_metrics
_.log_hyperparams
_.finalize
rejected_values  # RecorderLosses.rejected_values: read by getattr through METRIC_OF

# The on-disk format (docs/format.md): names other tools read.

# Claims an evidence line carries: read by the checker that recomputes every line (tests/evidence_checker.py).
below  # Level.below
equal  # Level.equal
within  # Change.within
factors  # Product.factors
predicate  # Occurrences.predicate

# Signatures fixed by someone else.
_.writeable  # numpy's ndarray.flags.writeable, set to make shared series read-only

# Set on Textual objects, read by Textual.
_.border_subtitle  # Widget.border_subtitle: drawn by Textual in the panel's bottom border

# Named by the job kinds as "module:function" strings (tuidiag/job_kinds/builtin.py), loaded by name.
render_lr_find
render_nan_hunt
render_overfit
render_sharpness

# Read by tests only, as the limit the code keeps.
SHORT_MAX  # the longest short badge a code may have (tests/test_keys.py checks every code against it)
_.summaries_read  # EnvelopeRun.summaries_read: shards read from their summaries (tests/test_envelope_run.py: the cache is used)
_.level_for  # Pyramid.level_for: the level a span is drawn from (tests/test_envelope.py checks the pyramid's choice)

# Read by the accuracy benchmark (benchmarks/suite/metrics.py), which refits the calibration from it.
raw_confidence  # Finding.raw_confidence: the rule's score before calibration

# Set on a LightningModule so that its own self.log_dict(...) calls do nothing while a live job runs.
_.log_dict  # tuidiag/integrations/job_loss.py: silenced_logging

# Textual's Underline reactives, read by Textual when it draws the tab bar.
_.highlight_start  # RunScreen._underline_at_once: the underline under the new tab in the switch's frame
_.highlight_end  # the same
