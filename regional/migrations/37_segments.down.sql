DROP TABLE segment_members;
DROP TABLE segments;
