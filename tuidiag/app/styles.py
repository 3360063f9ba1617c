"""The monitor app's stylesheet (``TuidiagApp.CSS``): the layout of the overview, run view and compare screens."""

CSS = """
#run-title, #overview-title, #compare-title { height: 1; background: $boost; }
#compare-head { dock: top; height: auto; }
#compare-verdict { height: auto; max-height: 6; }
#compare-tabs { height: 1fr; }
#compare-numbers { height: auto; max-height: 100%; }
#cmp-chart-numbers { height: 1fr; }
CompareScreen.short #compare-numbers { height: 1fr; }
CompareScreen.short #cmp-chart-numbers { display: none; }
#compare-table { width: auto; }
#system-strip { height: 1; color: $text-muted; }
#run-title, #overview-title, #system-strip { text-wrap: nowrap; text-overflow: ellipsis; }
#overview-hint { height: auto; color: $text-muted; }
#run-main { height: 1fr; }
#charts { width: 3fr; min-width: 68; }  /* 68: every tab label (run_tabs.py) fits beside the diagnosis at 110 columns */
#diagnosis { width: 2fr; min-width: 40; }
RunScreen.narrow #run-main { layout: vertical; }
RunScreen.narrow #charts { width: 1fr; height: 1fr; min-width: 0; }
RunScreen.narrow #diagnosis { width: 1fr; height: 50%; min-width: 0; }
RunScreen.diagnosis-full #charts { display: none; }
RunScreen.diagnosis-full #diagnosis { width: 1fr; height: 1fr; min-width: 0; }
#cursor-bar { height: 1; }
TabPane { padding: 0; }
LayerHeatmap { height: 1fr; }
#jobs-tab { overflow-x: hidden; overflow-y: scroll; height: 1fr;  /* always: one that came with a long result came a frame late */
            scrollbar-background: $background; scrollbar-background-hover: $background; scrollbar-background-active: $background; }
#jobs-text { width: 100%; }
#dist-note { height: auto; padding: 1 1; color: $text-muted; }
"""
