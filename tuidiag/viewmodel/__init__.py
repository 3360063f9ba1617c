"""What the monitor shows, computed without any UI: run snapshots, downsampling, file watching.

Nothing here imports textual or torch; the app in ``tuidiag.app`` renders what this
package computes, and tests can check the numbers without a terminal.
"""
