"""The basics every subject uses: the names users see, quantities, times, validated fragments,
notices."""
