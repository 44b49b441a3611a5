"""The console's sources: one long-lived thread per source of data (telemetry, engine, jobs, experiments,
episodes, campaign). Each reads its headless layer, builds a frozen view (frank.console.state) and posts it
as a typed message (frank.console.messages) only when it changed; the app keeps the newest, the screens
render it. A source's reads never overlap: the next one is due only after the last one ended."""
