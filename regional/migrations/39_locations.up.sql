-- A project's locations: named areas (a circle or a polygon) that
-- $in_location conditions test geopoints against (issue 37). shape is the
-- reference's shape object as written, checked by internal/geo.
CREATE TABLE locations (
    project_id TEXT NOT NULL,
    id TEXT NOT NULL,
    name TEXT NOT NULL,
    shape JSONB NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ,
    PRIMARY KEY (project_id, id)
);
CREATE INDEX locations_created ON locations (project_id, created_at, id);
