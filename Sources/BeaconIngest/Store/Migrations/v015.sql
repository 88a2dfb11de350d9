-- BTHome quantities under Home Assistant's names
--
-- Sensor readings of BTHome objects are named as Home Assistant's BTHome integration names them (docs/
-- sensor-readings.md): the readings stored under the earlier names are renamed.

UPDATE beaconflow.sensor_readings_raw SET quantity = CASE quantity
        WHEN 'pm2_5' THEN 'pm25'
        WHEN 'co2' THEN 'carbon_dioxide'
        WHEN 'tvoc' THEN 'volatile_organic_compounds'
        WHEN 'dewpoint' THEN 'dew_point'
        WHEN 'generic_boolean' THEN 'generic'
    END
WHERE quantity IN ('pm2_5', 'co2', 'tvoc', 'dewpoint', 'generic_boolean');
