-- Database names are unique whatever their case: `DEMO` beside another
-- tenant's `demo` would pass for it. (Names are ASCII, so lower() folds
-- them alike on SQLite and PostgreSQL.) A store that already holds two
-- names differing only in case stops here until one is dropped.
CREATE UNIQUE INDEX databases_name_any_case ON databases (lower(name));
