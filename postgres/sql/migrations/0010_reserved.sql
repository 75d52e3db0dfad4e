-- Placeholder, on branch i16-fleetver only: another change of issue 16
-- takes number 10. Replace this file with it when merging.
select 1;
